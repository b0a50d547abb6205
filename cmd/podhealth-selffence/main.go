//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	sidecarlogic "github.com/podhealth/podhealth/internal/sidecar"
	"github.com/podhealth/podhealth/internal/version"
	"github.com/podhealth/podhealth/selffence"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, sidecar{
		client: clientFromConfig,
		start: func() error {
			if err := checkProcessNamespace(); err != nil {
				return err
			}
			return stopOthers()
		},
		stop: func() {
			_ = stopOthers() // nothing to do about an error: the process exits
			os.Exit(1)
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "podhealth-selffence:", err)
		os.Exit(2)
	}
}

// sidecar is what run needs from outside: the API client, the stop of
// the pod's other processes when it starts (start), and at the deadline
// (stop, never returning).
type sidecar struct {
	client func(kubeconfig string) (selffence.Client, error)
	start  func() error
	stop   func()
	// opts, when not nil, changes the Guard's options last (tests).
	opts func(*selffence.Options)
	// listening, when not nil, hears the address served on (tests).
	listening func(net.Addr)
}

// config is the command line.
type config struct {
	opts             selffence.Options
	listen, file     string
	kubeconfig       string
	printAnnotations bool
	version          bool
}

func parse(args []string, getenv func(string) string) (config, error) {
	var c config
	fs := flag.NewFlagSet("podhealth-selffence", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.opts.Lease, "lease", "", "the Lease, in the pod's namespace, that the workload must hold to write (required)")
	fs.StringVar(&c.opts.Namespace, "namespace", getenv("POD_NAMESPACE"), "the pod's namespace (default $POD_NAMESPACE)")
	fs.StringVar(&c.opts.Identity, "identity", getenv("POD_NAME"), "the Lease's holder: the pod's name (default $POD_NAME)")
	fs.StringVar((*string)(&c.opts.PodUID), "pod-uid", getenv("POD_UID"), "the pod's UID, from the downward API's metadata.uid (default $POD_UID)")
	fs.DurationVar(&c.opts.Duration, "duration", selffence.DefaultDuration, "the Lease's duration, whole seconds")
	fs.DurationVar(&c.opts.RenewInterval, "renew-interval", 0, "how often to renew (default a third of --duration)")
	fs.DurationVar(&c.opts.Deadline, "deadline", selffence.DefaultDeadline, "how long after the Lease's expiry the pod's processes are stopped: what the pod states in podhealth.io/fence-deadline")
	fs.DurationVar(&c.opts.StopTakes, "stop-takes", selffence.DefaultStopTakes, "how long killing the pod's processes takes")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8089", `where GET /may-write answers (empty: nowhere); keep it on 127.0.0.1, which only the pod's containers reach`)
	fs.StringVar(&c.file, "file", "", "a file that exists while the workload may write, created once the Lease is held and removed as soon as writing must stop (empty: none)")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "a kubeconfig, out of a cluster (default: the pod's service account)")
	fs.BoolVar(&c.printAnnotations, "print-annotations", false, "print the annotations the pod template must carry for these settings, and exit")
	fs.BoolVar(&c.version, "version", false, "print the version, commit and Go version of this build, and exit")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.listen == "" && c.file == "" && !c.printAnnotations && !c.version {
		return c, errors.New("neither --listen nor --file: the workload could not ask whether it may write")
	}
	identitySet, uidSet := false, false
	fs.Visit(func(f *flag.Flag) {
		identitySet = identitySet || f.Name == "identity"
		uidSet = uidSet || f.Name == "pod-uid"
	})
	switch podName := getenv("POD_NAME"); {
	case c.printAnnotations && identitySet:
		return c, fmt.Errorf("--identity %q with --print-annotations: the annotations state the protocol for every pod of a template, each holding the Lease under its own name; drop --identity", c.opts.Identity)
	case c.printAnnotations && uidSet:
		return c, fmt.Errorf("--pod-uid %q with --print-annotations: the annotations state the protocol for every pod of a template; drop --pod-uid", c.opts.PodUID)
	case identitySet && podName != "" && c.opts.Identity != podName:
		return c, fmt.Errorf("--identity %q is not the pod's name %q ($POD_NAME): the fencer expects the pod's name as the Lease's holder, and would read this one's renewals as another holder's takeover", c.opts.Identity, podName)
	}
	if c.printAnnotations {
		c.opts.Identity, c.opts.PodUID = "", ""
	}
	return c, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer, s sidecar) error {
	c, err := parse(args, getenv)
	if err != nil {
		return err
	}
	if c.version {
		fmt.Fprintln(out, version.String("podhealth-selffence"))
		return nil
	}
	if c.printAnnotations {
		var tmpl corev1.PodTemplateSpec
		if err := c.opts.Stamp(&tmpl); err != nil {
			return err
		}
		keys := make([]string, 0, len(tmpl.Annotations))
		for k := range tmpl.Annotations {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(out, "%s: %q\n", k, tmpl.Annotations[k])
		}
		return nil
	}
	client, err := s.client(c.kubeconfig)
	if err != nil {
		return err
	}
	c.opts.Logger = klog.Background()
	if s.opts != nil {
		s.opts(&c.opts)
	}
	// The order of the start and the wait after writing stopped is
	// sidecarlogic.Run's; what follows binds it to this process: the
	// may-write file a predecessor left goes first, so that the
	// restarted workload does not read it, then the pod's other processes
	// are stopped (s.start); the listener and the file keeper answer.
	return sidecarlogic.Run(ctx, client, c.opts, sidecarlogic.Hooks{
		Start: func() error {
			if c.file != "" {
				if err := os.Remove(c.file); err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("removing the may-write file a predecessor left: %w", err)
				}
			}
			if s.start != nil {
				return s.start()
			}
			return nil
		},
		Stop: s.stop,
		Serve: func(guard *selffence.Guard) (func(), error) {
			stop := func() {}
			if c.listen != "" {
				l, err := net.Listen("tcp", c.listen)
				if err != nil {
					return nil, err
				}
				if s.listening != nil {
					s.listening(l.Addr())
				}
				srv := &http.Server{Handler: handler(guard), ReadHeaderTimeout: 5 * time.Second}
				go srv.Serve(l) //nolint:errcheck // ends with the process
				stop = func() { srv.Close() }
			}
			if c.file != "" {
				go keepFile(guard, c.file)
			}
			return stop, nil
		},
	})
}

// handler answers GET /may-write, and GET /live for the workload's
// liveness probe.
func handler(g *selffence.Guard) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /may-write", answer(g.MayWrite))
	mux.HandleFunc("GET /live", answer(func() bool { return sidecarlogic.Live(g) }))
	return mux
}

// answer answers 200 "true" when yes says so, 503 "false" otherwise.
func answer(yes func() bool) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if yes() {
			fmt.Fprintln(w, "true")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "false")
	}
}

// keepFile creates the file once the Lease is held and removes it the
// moment writing must stop.
func keepFile(g *selffence.Guard, path string) {
	select {
	case <-g.Held():
	case <-g.Context().Done():
		return
	}
	if err := os.WriteFile(path, []byte("true\n"), 0o644); err != nil {
		klog.Background().Error(err, "writing the may-write file; the workload will not write", "file", path)
	}
	<-g.Context().Done()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		// The workload would go on writing: stop it now, and only then
		// say why (a log may block).
		_ = stopOthers()
		klog.Background().Error(err, "removing the may-write file failed; stopped the pod's processes", "file", path)
		os.Exit(1)
	}
}

// clientFromConfig is the client of the pod's service account, or of a
// kubeconfig.
func clientFromConfig(kubeconfig string) (selffence.Client, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return cs, nil
}

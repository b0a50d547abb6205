// Command writer is the e2e suite's container on real nodes: every
// WRITE_INTERVAL (100ms by default) it appends one line to WRITES_FILE,
//
//	IDENTITY UID SEQUENCE UNIX_NANOSECONDS
//
// so that the file alone shows who wrote to the "volume" and when: a
// writer that runs on a cut-off node keeps writing there. It stops on
// SIGTERM, so a graceful delete is quick.
//
// With LEASE set it fences itself with a selffence.Guard: it holds the
// Lease LEASE of POD_NAMESPACE as IDENTITY through KUBECONFIG, for
// LEASE_DURATION (4s by default) renewed every second, and writes only
// while the Guard says it may; the Guard stops the process LEASE_DEADLINE
// (3s by default) after the Lease expires. IGNORE_GUARD, set to the
// writer's IDENTITY, is the mutation: that writer writes whatever the
// Guard says, and is never stopped.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podhealth/podhealth/selffence"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "writer:", err)
		os.Exit(1)
	}
}

func run() error {
	path, identity, uid := os.Getenv("WRITES_FILE"), os.Getenv("IDENTITY"), os.Getenv("UID")
	if path == "" || identity == "" || uid == "" {
		return fmt.Errorf("WRITES_FILE, IDENTITY and UID must be set (got %q, %q, %q)", path, identity, uid)
	}
	interval := 100 * time.Millisecond
	if s := os.Getenv("WRITE_INTERVAL"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("WRITE_INTERVAL %q: want a positive duration", s)
		}
		interval = d
	}
	mayWrite, err := guard(identity, uid)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for seq := 1; ; {
		// One write(2) per line: O_APPEND keeps lines of writers on
		// several nodes whole.
		if mayWrite() {
			if _, err := fmt.Fprintf(f, "%s %s %d %d\n", identity, uid, seq, time.Now().UnixNano()); err != nil {
				return err
			}
			seq++
		}
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
	}
}

// guard returns what says whether the writer may write: always, without
// LEASE; with it, a selffence.Guard's MayWrite, its Run started, for the
// pod identity whose UID is uid.
func guard(identity, uid string) (func() bool, error) {
	lease := os.Getenv("LEASE")
	if lease == "" {
		return func() bool { return true }, nil
	}
	duration, deadline := 4*time.Second, 3*time.Second
	for env, d := range map[string]*time.Duration{"LEASE_DURATION": &duration, "LEASE_DEADLINE": &deadline} {
		if s := os.Getenv(env); s != "" {
			v, err := time.ParseDuration(s)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", env, s, err)
			}
			*d = v
		}
	}
	config, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return nil, err
	}
	// A short timeout: a request the partition holds must fail before
	// the Lease would expire.
	config.Timeout = time.Second
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	ignore := os.Getenv("IGNORE_GUARD") == identity
	opts := selffence.Options{Namespace: os.Getenv("POD_NAMESPACE"), Lease: lease, Identity: identity, PodUID: types.UID(uid),
		Duration: duration, RenewInterval: time.Second, Deadline: deadline}
	if ignore {
		opts.Exit = func() {} // the mutation: never stopped
	}
	g, err := selffence.New(client, opts)
	if err != nil {
		return nil, err
	}
	go func() {
		err := g.Run(context.Background())
		fmt.Fprintln(os.Stderr, "writer: the Lease:", err)
	}()
	if ignore {
		return func() bool { return true }, nil
	}
	return g.MayWrite, nil
}

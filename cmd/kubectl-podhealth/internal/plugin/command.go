package plugin

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/podhealth/podhealth/internal/version"
	"github.com/podhealth/podhealth/podsource"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Exit codes. When several apply, the first in this order wins: error,
// held back, dead pods left, deleted, nothing to do.
const (
	// ExitNothingToDo: no pod is dead. Pods terminating on a node that is
	// not Ready may be listed; no rule calls them dead yet.
	ExitNothingToDo = 0
	// ExitError: bad input, the cluster could not be read, or a force
	// delete failed.
	ExitError = 1
	// ExitDeleted: --force-delete removed every dead pod it listed.
	ExitDeleted = 2
	// ExitHeldBack: at least one dead pod is held back: it needs fencing
	// evidence, the breaker is open, it opted out, or --max-deletes was
	// reached.
	ExitHeldBack = 3
	// ExitDeadPodsLeft: dead pods that --force-delete would remove were
	// listed and not deleted: a read-only run, or the confirmation was
	// declined.
	ExitDeadPodsLeft = 4
)

// DefaultPageSize is how many pods and nodes one LIST request asks for.
const DefaultPageSize = 500

// DefaultMaxDeletes is the default of --max-deletes.
const DefaultMaxDeletes = 10

// Env is how the command reaches the cluster, the clock and the terminal.
// The zero value is the real one. Main only reads it; its functions may be
// called from the goroutine that runs Main only.
type Env struct {
	// NewCluster builds the Cluster from the REST config that the flags
	// resolved. Nil means NewCluster.
	NewCluster func(*rest.Config) (Cluster, error)
	// IsTerminal says whether w is a terminal, for the progress of long
	// scans on stderr. Nil means an *os.File that is a terminal.
	IsTerminal func(w io.Writer) bool
	// Clock is the checker's clock and the one node ages are measured on.
	// Nil means the real clock.
	Clock clock.PassiveClock
	// PageSize is the limit of each LIST. Zero means DefaultPageSize.
	PageSize int64
}

// IOStreams are the command's standard input, output and error.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// Main runs kubectl-podhealth with args (without the program name) and
// returns its exit code. Errors are one line on streams.ErrOut.
func Main(ctx context.Context, args []string, streams IOStreams, env Env) int {
	o := &options{streams: streams, env: env}
	cmd := o.command(ctx)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(streams.ErrOut, "error: "+oneLine(err.Error()))
		return ExitError
	}
	return o.exit
}

// options are the command's flags and state.
type options struct {
	kubeconfig    string
	overrides     clientcmd.ConfigOverrides
	userExtras    []string // --as-user-extra, key=value each
	allNamespaces bool
	selector      string
	selectorSet   bool // -l was given, even blank
	output        string
	forceDelete   bool
	yes           bool
	maxDeletes    int
	verbosity     int // -v, --v: kubectl's log level (6 logs each request)

	streams IOStreams
	env     Env
	exit    int
}

const longHelp = `List the pods that died with their node, and force-delete them safely.

Without flags it only reads: it lists the pods that podhealth calls dead, those
it holds back, and those terminating on a node that is not Ready, with the node's
state, the rule that decided, and what --force-delete would do. It sends no write.

With --force-delete it prints the same list, asks for confirmation (unless --yes),
and force-deletes exactly the pods the library calls dead and its policy lets go:
grace period 0, a precondition on each pod's UID, the library's fencing policy
and breaker, and at most --max-deletes deletes per run.

Exit codes:
  0  nothing to do: no dead pod
  1  error (bad input, the cluster could not be read, a delete failed)
  2  deleted: --force-delete removed every dead pod it listed
  3  some dead pods are held back (fencing evidence, breaker, opt-out, --max-deletes)
  4  dead pods were listed and not deleted (no --force-delete, or not confirmed)`

const examples = `  # List dead and stuck pods in the current namespace
  kubectl podhealth

  # ... in every namespace, with the rules' evidence
  kubectl podhealth -A -o wide

  # Force-delete the dead pods of one app, asking first
  kubectl podhealth -n shop -l app=web --force-delete`

func (o *options) command(ctx context.Context) *cobra.Command {
	cmd := &cobra.Command{
		Use:           "kubectl-podhealth",
		Short:         "List the pods that died with their node, and force-delete them safely",
		Long:          longHelp,
		Example:       examples,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl podhealth"},
		Version:       version.String("kubectl-podhealth"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.selectorSet = cmd.Flags().Changed("selector")
			return o.run(ctx)
		},
	}
	cmd.SetVersionTemplate("{{.Version}}\n")
	cmd.SetIn(o.streams.In)
	cmd.SetOut(o.streams.Out)
	cmd.SetErr(o.streams.ErrOut)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return fmt.Errorf("%w (see kubectl podhealth --help)", err)
	})
	o.addKubeconfigFlags(cmd)
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "Scan the pods of every namespace.")
	cmd.Flags().StringVarP(&o.selector, "selector", "l", "", "Label selector of the pods to scan (and, with --force-delete, the only pods that may be deleted).")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: wide, json or yaml. Default: a table.")
	cmd.Flags().BoolVar(&o.forceDelete, "force-delete", false, "Force-delete the dead pods that the policy lets go, after confirmation.")
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "With --force-delete: do not ask for confirmation.")
	cmd.Flags().IntVar(&o.maxDeletes, "max-deletes", DefaultMaxDeletes, "With --force-delete: the most pods deleted in one run; the rest are held back.")
	// kubectl's -v, before cobra takes -v for --version (it does when the
	// shorthand is free).
	cmd.Flags().IntVarP(&o.verbosity, "v", "v", 0, "Number for the log level verbosity, as kubectl's -v (6 logs each request to the API server).")
	return cmd
}

// addKubeconfigFlags adds kubectl's flags for reaching the cluster, by
// kubectl's names: --kubeconfig, and client-go's recommended overrides
// (--context, --cluster, --user, -n/--namespace, -s/--server, --token,
// --as, --as-group, --as-uid, --certificate-authority,
// --client-certificate, --client-key, --insecure-skip-tls-verify,
// --tls-server-name, --proxy-url, --disable-compression, --username,
// --password, --request-timeout), and --as-user-extra. kubectl's
// --cache-dir is not among them: the plugin keeps no discovery cache.
func (o *options) addKubeconfigFlags(cmd *cobra.Command) {
	flags := cmd.Flags()
	flags.StringVar(&o.kubeconfig, clientcmd.RecommendedConfigPathFlag, "", "Path to the kubeconfig file to use for CLI requests.")
	names := clientcmd.RecommendedConfigOverrideFlags("")
	names.ClusterOverrideFlags.APIServer.ShortName = "s"
	clientcmd.BindOverrideFlags(&o.overrides, flags, names)
	flags.StringArrayVar(&o.userExtras, "as-user-extra", nil, "User extras to impersonate for the operation (key=value), this flag can be repeated to specify multiple values for the same key.")
}

// kubeconfigLoader resolves the kubeconfig as kubectl does: --kubeconfig,
// else $KUBECONFIG, else ~/.kube/config, with the flags' overrides. It never
// prompts: stdin is for the confirmation.
func (o *options) kubeconfigLoader() (clientcmd.ClientConfig, error) {
	var extras map[string][]string
	for _, extra := range o.userExtras {
		key, value, ok := strings.Cut(extra, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("--as-user-extra %q: want key=value", extra)
		}
		if extras == nil {
			extras = map[string][]string{}
		}
		extras[key] = append(extras[key], value)
	}
	o.overrides.AuthInfo.ImpersonateUserExtra = extras
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &o.overrides), nil
}

// run is the whole command; o.exit is set when it returns nil.
func (o *options) run(ctx context.Context) error {
	if err := setVerbosity(o.verbosity); err != nil {
		return err
	}
	switch o.output {
	case "", "wide", "json", "yaml":
	default:
		return fmt.Errorf("unknown output format %q: use wide, json or yaml", o.output)
	}
	if o.maxDeletes < 1 {
		return fmt.Errorf("--max-deletes must be at least 1, not %d", o.maxDeletes)
	}
	if o.yes && !o.forceDelete {
		return errors.New("--yes only confirms --force-delete; add --force-delete, or drop --yes")
	}
	selector := podsource.WholeNamespace()
	if o.selectorSet {
		sel, err := labels.Parse(o.selector)
		switch {
		case err != nil:
			return fmt.Errorf("invalid selector %q: %w", o.selector, err)
		case sel.Empty():
			// A blank selector parses as "every pod", which the deleter
			// would then refuse pod by pod, after the prompt.
			return fmt.Errorf("selector %q selects every pod; drop -l to scan the whole namespace, or give the workload's labels", o.selector)
		}
		selector = sel
	}
	loader, err := o.kubeconfigLoader()
	if err != nil {
		return err
	}
	config, err := loader.ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	namespace := ""
	if !o.allNamespaces {
		if namespace, _, err = loader.Namespace(); err != nil {
			return fmt.Errorf("kubeconfig: %w", err)
		}
	}
	// A scan is a few LISTs and the delete phase one GET and one DELETE per
	// pod: client-side throttling would only slow those down.
	config.QPS, config.Burst = 50, 100
	newCluster := o.env.NewCluster
	if newCluster == nil {
		newCluster = NewCluster
	}
	cluster, err := newCluster(config)
	if err != nil {
		return err
	}
	clk := o.env.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	pageSize := o.env.PageSize
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}

	ev, warnings, err := newEvidence(ctx, cluster, pageSize)
	if err != nil {
		return err
	}
	list := &PodHealthList{TypeMeta: metav1.TypeMeta{APIVersion: ListGroupVersionKind.GroupVersion().String(), Kind: ListGroupVersionKind.Kind}, Items: []PodHealth{}}
	for _, w := range warnings {
		o.warn(w)
		list.Warnings = append(list.Warnings, w)
	}
	s := &scan{cluster: cluster, namespace: namespace, selector: o.selector, pageSize: pageSize, evidence: ev, clock: clk}
	if o.isTerminal(o.streams.ErrOut) {
		s.progress = o.streams.ErrOut
	}
	res, err := s.run(ctx)
	if err != nil {
		return err
	}
	for _, w := range res.warnings {
		o.warn(w)
	}
	list.Warnings = append(list.Warnings, res.warnings...)
	list.ScannedPods = res.scanned
	list.Items = append(list.Items, res.rows...)
	if res.scanned == 0 && namespace != "" {
		if err := namespaceExists(ctx, cluster, namespace); err != nil {
			return err
		}
	}

	if s.claimErr != nil {
		// The pods whose claims could not be read are listed, held, and
		// nothing is force-deleted: the evidence is incomplete.
		if err := o.print(list, o.streams.Out, namespace); err != nil {
			return err
		}
		return fmt.Errorf("some evidence could not be read, so nothing was force-deleted: %w", s.claimErr)
	}
	if !o.forceDelete {
		if err := o.print(list, o.streams.Out, namespace); err != nil {
			return err
		}
		o.exit = exitCode(list.Items, false)
		return nil
	}
	return o.runForceDelete(ctx, cluster, selector, list, namespace, pageSize, clk)
}

func (o *options) runForceDelete(ctx context.Context, cluster Cluster, selector labels.Selector, list *PodHealthList, namespace string, pageSize int64, clk clock.PassiveClock) error {
	// The plan goes where a person reads it: stdout for a table, stderr
	// when stdout carries a document.
	planOut := o.streams.Out
	if o.output == "json" || o.output == "yaml" {
		planOut = o.streams.ErrOut
	}
	var candidates []*PodHealth
	for i := range list.Items {
		if list.Items[i].Action == ActionForceDelete {
			candidates = append(candidates, &list.Items[i])
		}
	}
	if len(candidates) == 0 {
		if err := o.print(list, o.streams.Out, namespace); err != nil {
			return err
		}
		fmt.Fprintln(o.streams.ErrOut, "No pod to force-delete.")
		o.exit = exitCode(list.Items, true)
		return nil
	}
	if o.output == "json" || o.output == "yaml" {
		if err := o.printTable(list, planOut, namespace); err != nil {
			return err
		}
	} else if err := o.print(list, planOut, namespace); err != nil {
		return err
	}
	if !o.yes && !o.confirm(len(candidates)) {
		o.exit = exitCode(list.Items, false)
		return nil
	}
	warnings, err := forceDelete(ctx, cluster, selector, candidates, o.maxDeletes, pageSize, clk)
	for _, w := range warnings {
		if !contains(list.Warnings, w) {
			o.warn(w)
			list.Warnings = append(list.Warnings, w)
		}
	}
	if err != nil {
		return err
	}
	o.exit = exitCode(list.Items, true)
	if o.output == "json" || o.output == "yaml" {
		if err := o.print(list, o.streams.Out, namespace); err != nil {
			return err
		}
		if o.exit == ExitError {
			fmt.Fprintln(o.streams.ErrOut, "error: a force delete failed; see the pod's result")
		}
		return nil
	}
	fmt.Fprintln(o.streams.Out)
	for _, row := range list.Items {
		result := row.Result
		if result == "" {
			switch row.Action {
			case ActionHeldBack:
				result = "held back: " + row.HeldBack
			case ActionRefused:
				result = "refused: " + row.HeldBack
			default:
				continue // terminating: nothing to do
			}
		}
		if row.Hint != "" && (row.done == doneHeld || row.Action == ActionHeldBack) {
			result += "; " + row.Hint
		}
		fmt.Fprintf(o.streams.Out, "pod %s/%s: %s\n", row.Namespace, row.Name, result)
	}
	if o.exit == ExitError {
		fmt.Fprintln(o.streams.ErrOut, "error: a force delete failed; see the pod's line above")
	}
	return nil
}

// confirm asks on stderr and reads the answer from stdin.
func (o *options) confirm(n int) bool {
	more := ""
	if n > o.maxDeletes {
		more = fmt.Sprintf(" (--max-deletes=%d: the first %d; the rest are held back)", o.maxDeletes, o.maxDeletes)
	}
	fmt.Fprintf(o.streams.ErrOut, "Force-delete %d pod(s)%s? Their containers may still run if a node is only cut off. [y/N]: ", n, more)
	line, err := bufio.NewReader(o.streams.In).ReadString('\n')
	answer := strings.ToLower(strings.TrimSpace(line))
	if answer == "y" || answer == "yes" {
		return true
	}
	if err != nil && answer == "" {
		fmt.Fprintln(o.streams.ErrOut, "\nNo answer on stdin: nothing deleted (--yes skips the question).")
	} else {
		fmt.Fprintln(o.streams.ErrOut, "Nothing deleted.")
	}
	return false
}

func (o *options) warn(msg string) {
	fmt.Fprintln(o.streams.ErrOut, "warning: "+oneLine(msg))
}

func (o *options) isTerminal(w io.Writer) bool {
	if o.env.IsTerminal != nil {
		return o.env.IsTerminal(w)
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// namespaceExists tells a namespace without pods from one that does not
// exist. Without the right to read namespaces it cannot tell, and says
// nothing.
func namespaceExists(ctx context.Context, cluster Cluster, namespace string) error {
	_, err := cluster.GetNamespace(ctx, namespace)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("namespace %q not found", namespace)
	}
	return nil
}

// exitCode is the exit code of a run whose rows are final; deleting says
// whether --force-delete ran.
func exitCode(rows []PodHealth, deleting bool) int {
	var failed, held, left, removed bool
	for _, r := range rows {
		switch {
		case r.done == doneFailed:
			failed = true
		case r.done == doneHeld || r.Action == ActionHeldBack || r.Action == ActionRefused:
			held = true
		case r.done == doneRemoved:
			removed = true
		case r.Action == ActionForceDelete && r.done == notDone:
			left = true
		}
	}
	switch {
	case failed:
		return ExitError
	case held:
		return ExitHeldBack
	case left:
		return ExitDeadPodsLeft
	case removed && deleting:
		return ExitDeleted
	}
	return ExitNothingToDo
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// setVerbosity sets klog's level, which client-go logs its requests at,
// as kubectl's -v does.
func setVerbosity(level int) error {
	if level < 0 {
		return fmt.Errorf("-v must be 0 or more, not %d", level)
	}
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	return fs.Set("v", strconv.Itoa(level))
}

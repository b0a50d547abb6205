// Command podhealth-controller force-deletes, in the namespaces labelled
// podhealth.io/enabled=true, the pods that died with their node, for every
// workload at once and without changing its operator: pods left
// Terminating by the taint-eviction controller on a node that no kubelet
// answers for, pods whose node is gone, pods the kubelet terminated. Their
// owners recreate them. StatefulSet pods and single-writer volumes wait for
// fencing (the out-of-service taint, or the node's deletion); a Breaker
// stops all force deletes when many nodes fail at once; a budget bounds
// them. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/podhealth/podhealth/cmd/podhealth-controller/internal/controller"
	"github.com/podhealth/podhealth/fencing"
	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/internal/version"
	"github.com/podhealth/podhealth/metrics"
	podhealthcr "github.com/podhealth/podhealth/podsource/controllerruntime"
	"github.com/podhealth/podhealth/podsource/kube"
)

// Config is what the flags set.
type Config struct {
	Namespaces       string
	WatchNamespaces  []string // the namespaced mode's namespaces; nil means cluster-wide
	DryRun           bool
	MaxDeletes       int
	DeleteWindow     time.Duration
	BreakerShare     float64
	BreakerMin       int
	BreakerRecheck   time.Duration
	MemoryCapacity   int
	LeaderElect      bool
	LeaderElectionNS string
	// LeaderElection holds --leader-election-id and the Lease's timings.
	LeaderElection    LeaderElection
	MetricsAddr       string
	MetricsSecure     bool
	ProbeAddr         string
	PprofAddr         string
	MaxConcurrentWork int
	KubeAPIQPS        float64
	KubeAPIBurst      int
	Version           bool
	// ShutdownTaints are --shutdown-taint's; ApplyOutOfService is
	// --apply-out-of-service.
	ShutdownTaints    []health.ShutdownTaint
	ApplyOutOfService bool
	// FenceLease is --fence-lease; NetworkFenceDrivers and
	// NetworkFenceClasses are --network-fence-driver's and
	// --network-fence-class's.
	FenceLease          bool
	NetworkFenceDrivers []string
	NetworkFenceClasses []string
}

// LeaderElection is the leader-election Lease's name and timings. The
// defaults are controller-runtime's and client-go's: a standby takes over
// from a leader that died without giving up its Lease within LeaseDuration
// plus up to one RetryPeriod.
type LeaderElection struct {
	ID            string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// defaultLeaderElection is the flags' defaults.
var defaultLeaderElection = LeaderElection{ID: "podhealth-controller", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}

// leaderElectionJitter is client-go's leaderelection.JitterFactor: it
// refuses a renew deadline that is not longer than this many retry periods.
const leaderElectionJitter = 1.2

// check refuses what client-go's leader election would refuse at start,
// so that the flag check, not a crash loop, names the bad value.
func (le LeaderElection) check() error {
	if msgs := validation.IsDNS1123Subdomain(le.ID); len(msgs) > 0 {
		return fmt.Errorf("--leader-election-id: %q is not a Lease name: %s", le.ID, strings.Join(msgs, "; "))
	}
	switch {
	case le.RetryPeriod <= 0:
		return errors.New("--leader-election-retry-period must be positive")
	case le.RenewDeadline <= time.Duration(leaderElectionJitter*float64(le.RetryPeriod)):
		return fmt.Errorf("--leader-election-renew-deadline (%v) must be longer than %v times --leader-election-retry-period (%v)", le.RenewDeadline, leaderElectionJitter, le.RetryPeriod)
	case le.LeaseDuration <= le.RenewDeadline:
		return fmt.Errorf("--leader-election-lease-duration (%v) must be longer than --leader-election-renew-deadline (%v)", le.LeaseDuration, le.RenewDeadline)
	}
	return nil
}

// metricsOptions serves /metrics as the flags say: by default over HTTPS,
// behind the API server's authentication and authorization (TokenReview
// and SubjectAccessReview, as kubebuilder's scaffold does), since the
// metrics name namespaces, workloads and what the controller holds back.
func metricsOptions(cfg Config) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: cfg.MetricsAddr, SecureServing: cfg.MetricsSecure}
	if cfg.MetricsSecure {
		opts.FilterProvider = metricsAuth
	}
	return opts
}

// defaultMemoryCapacity is --memory-capacity's default: 16,384 pods, about
// 3 MB, four times the library's default, since one Memory serves every
// group of the cluster. The cluster-wide budget (20 a minute) fills at most
// 200 of it in the Memory's 10 minutes; a cluster without a budget, or with
// many pods stuck terminating at once, may need more.
const defaultMemoryCapacity = 16384

// memoryShed is podhealth_memory_shed_total: how many force-deleted pods
// the shared Memory forgot for room before their time.
func memoryShed(memory *health.Memory) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "podhealth", Name: "memory_shed_total",
		Help: "Force-deleted pods that the controller's Memory forgot for room before its TTL; while it grows, raise --memory-capacity.",
	}, func() float64 { return float64(memory.Shed()) })
}

// outOfServiceCollector serves the podhealth_out_of_service_* metrics of
// --apply-out-of-service from the Reconciler's counts, read once per
// scrape.
type outOfServiceCollector struct {
	stats func() controller.OutOfServiceStats
}

var (
	oosApplied = prometheus.NewDesc("podhealth_out_of_service_taints_applied_total",
		"Out-of-service taints the controller applied to nodes that a --shutdown-taint fenced.", nil, nil)
	oosWouldApply = prometheus.NewDesc("podhealth_out_of_service_taints_would_apply_total",
		"Out-of-service taints a dry run would have applied.", nil, nil)
	oosRemoved = prometheus.NewDesc("podhealth_out_of_service_taints_removed_total",
		"Out-of-service taints the controller removed, once their node was Ready and its old pods gone.", nil, nil)
	oosTainted = prometheus.NewDesc("podhealth_out_of_service_tainted_nodes",
		"Nodes that carry an out-of-service taint the controller applied.", nil, nil)
	oosOldest = prometheus.NewDesc("podhealth_out_of_service_taint_oldest_seconds",
		"Age of the oldest out-of-service taint the controller applied that is still on its node (0 when none is).", nil, nil)
	oosRemovedAge = prometheus.NewDesc("podhealth_out_of_service_taint_removed_age_seconds",
		"Age of the out-of-service taints the controller removed, at their removal.", nil, nil)
)

func (outOfServiceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{oosApplied, oosWouldApply, oosRemoved, oosTainted, oosOldest, oosRemovedAge} {
		ch <- d
	}
}

func (c outOfServiceCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(oosApplied, prometheus.CounterValue, float64(s.Applied))
	ch <- prometheus.MustNewConstMetric(oosWouldApply, prometheus.CounterValue, float64(s.WouldApply))
	ch <- prometheus.MustNewConstMetric(oosRemoved, prometheus.CounterValue, float64(s.Removed))
	ch <- prometheus.MustNewConstMetric(oosTainted, prometheus.GaugeValue, float64(s.Tainted))
	ch <- prometheus.MustNewConstMetric(oosOldest, prometheus.GaugeValue, s.OldestAge.Seconds())
	ch <- prometheus.MustNewConstSummary(oosRemovedAge, s.Removed, s.RemovedAge.Seconds(), nil)
}

// checkShutdownTaint refuses, at the flag, a --shutdown-taint that the
// library would refuse at start: an empty or malformed key, Kubernetes'
// own node.kubernetes.io/ taints (set on silence or pressure, or the
// out-of-service taint itself), a key named twice, and a wait that is not
// positive.
func checkShutdownTaint(key string, after time.Duration, before []health.ShutdownTaint) error {
	switch {
	case key == "":
		return errors.New("KEY is empty")
	case len(validation.IsQualifiedName(key)) > 0:
		return fmt.Errorf("KEY %q is not a taint key: %s", key, strings.Join(validation.IsQualifiedName(key), "; "))
	case strings.HasPrefix(key, "node.kubernetes.io/"):
		return fmt.Errorf("KEY %q is Kubernetes' own taint: the node-lifecycle controller sets those on silence or pressure, which a running node can be, and %s already fences", key, corev1.TaintNodeOutOfService)
	case slices.ContainsFunc(before, func(t health.ShutdownTaint) bool { return t.Key == key }):
		return fmt.Errorf("KEY %q is named twice", key)
	case after <= 0:
		return fmt.Errorf("AFTER %v is not positive: a report of a shutdown may precede the power-off, and only a stated wait covers that", after)
	}
	return nil
}

// lateNodes lists the nodes of a NodeLister set after it was handed out;
// before that it fails, which a Breaker reads as open.
type lateNodes struct {
	lister atomic.Pointer[health.NodeLister]
}

func (l *lateNodes) set(n health.NodeLister) { l.lister.Store(&n) }

func (l *lateNodes) ListNodes(ctx context.Context) ([]*corev1.Node, error) {
	n := l.lister.Load()
	if n == nil {
		return nil, errors.New("the controller's view of the nodes is not set up yet")
	}
	return (*n).ListNodes(ctx)
}

// fencingHolds are podhealth_fencing_held_pods and
// podhealth_fencing_held_oldest_seconds: the dead pods that wait for fencing
// evidence (a StatefulSet's, or one with a ReadWriteOnce claim) and how long
// the oldest has waited, so that an alert tells the admin to fence a node.
func fencingHolds(holds func() (pods int, oldest time.Duration)) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "podhealth", Name: "fencing_held_pods",
			Help: "Dead pods whose last check held them back for fencing evidence: their node must be deleted, or tainted out-of-service once powered off.",
		}, func() float64 { pods, _ := holds(); return float64(pods) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "podhealth", Name: "fencing_held_oldest_seconds",
			Help: "How long the dead pod held back for fencing longest has been held (0 when none is).",
		}, func() float64 { _, oldest := holds(); return oldest.Seconds() }),
	}
}

func parseFlags(fs *flag.FlagSet, args []string) (Config, error) {
	var c Config
	fs.StringVar(&c.Namespaces, "namespace-selector", controller.EnabledLabel+"=true", "label selector of the namespaces to act in; nothing else is ever touched (an empty selector is refused)")
	var watch string
	fs.StringVar(&watch, "watch-namespaces", "", "comma-separated namespaces to act in, and the only pods cached (the namespaced mode: a Role in each namespace and a read-only ClusterRole for nodes suffice); empty means the namespaces --namespace-selector selects, cluster-wide")
	fs.BoolVar(&c.DryRun, "dry-run", false, "report (log, events, metrics) what would be force-deleted, and delete nothing")
	fs.IntVar(&c.MaxDeletes, "max-force-deletes", 20, "force deletes allowed per --force-delete-window over the whole cluster; 0 means no limit")
	c.DeleteWindow = time.Minute
	fs.Var(durationFlag{&c.DeleteWindow}, "force-delete-window", "the window of --max-force-deletes")
	fs.Float64Var(&c.BreakerShare, "breaker-unhealthy-share", 0.3, "share of not-Ready nodes (in the cluster or in a zone) at which all force deletes stop")
	fs.IntVar(&c.BreakerMin, "breaker-min-unhealthy", 3, "fewest not-Ready nodes that stop all force deletes, so that one failed node of a small cluster does not")
	c.BreakerRecheck = controller.DefaultBreakerRecheck
	fs.Var(durationFlag{&c.BreakerRecheck}, "breaker-recheck-interval", "how soon the groups the Breaker held back are judged again when neither a node or Lease event nor the Breaker's closing brings them back earlier")
	fs.IntVar(&c.MemoryCapacity, "memory-capacity", defaultMemoryCapacity, "force-deleted pods (and pods first seen terminating) remembered for 10 minutes, so that a lagging cache gets no second DELETE; about 184 bytes each. Raise it while podhealth_memory_shed_total grows")
	fs.BoolVar(&c.LeaderElect, "leader-elect", true, "run as one of several replicas: only the leader acts")
	fs.StringVar(&c.LeaderElectionNS, "leader-election-namespace", "", "namespace of the leader-election Lease; empty means the controller's own namespace (in a cluster)")
	c.LeaderElection = defaultLeaderElection
	fs.StringVar(&c.LeaderElection.ID, "leader-election-id", defaultLeaderElection.ID, "name of the leader-election Lease: replicas that share it elect one leader, so two installations in one namespace need two names (the manifests and the chart set it to the ServiceAccount's name, which follows a name prefix and the release's name)")
	fs.Var(durationFlag{&c.LeaderElection.LeaseDuration}, "leader-election-lease-duration", "how long a standby waits after the leader's last renewal before it takes the Lease: a leader that died without giving it up is replaced within this plus one --leader-election-retry-period")
	fs.Var(durationFlag{&c.LeaderElection.RenewDeadline}, "leader-election-renew-deadline", "how long the leader keeps retrying a renewal before it stops acting (and exits); shorter than --leader-election-lease-duration")
	fs.Var(durationFlag{&c.LeaderElection.RetryPeriod}, "leader-election-retry-period", "how often the leader renews and a standby tries to take the Lease")
	fs.StringVar(&c.MetricsAddr, "metrics-bind-address", ":8443", "address of the Prometheus /metrics endpoint; 0 disables it")
	fs.BoolVar(&c.MetricsSecure, "metrics-secure", true, "serve /metrics over HTTPS (a self-signed certificate) to clients whose token the API server accepts and that may get /metrics (the podhealth-controller-metrics-reader ClusterRole); false serves plain HTTP to anyone who reaches the port")
	fs.StringVar(&c.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.StringVar(&c.PprofAddr, "pprof-bind-address", "0", "address of Go's /debug/pprof/ endpoints, to see where the controller's memory and CPU go; 0 disables them")
	fs.IntVar(&c.MaxConcurrentWork, "workers", 4, "owner groups judged at once")
	fs.Float64Var(&c.KubeAPIQPS, "kube-api-qps", 50, "requests a second to the API server, on average (controller-runtime's default, 20, makes the dead pods of many groups that a closing Breaker lets go wait their turn)")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", 100, "requests to the API server in a burst")
	fs.BoolVar(&c.Version, "version", false, "print the version, commit and Go version of this build, and exit")
	fs.Func("shutdown-taint", "KEY=AFTER: a taint that, on a node that is not Ready, is fencing evidence once seen for AFTER (a Go duration), such as "+health.TaintCloudShutdown+"=2s, the cloud's word that the instance is shut down (docs/safety.md says what each cloud means by it); repeat for several. None by default", func(v string) error {
		key, after, ok := strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("%q is not KEY=AFTER", v)
		}
		d, err := parseDuration(after)
		if err != nil {
			return fmt.Errorf("%q: AFTER: %w", v, err)
		}
		if err := checkShutdownTaint(key, d, c.ShutdownTaints); err != nil {
			return fmt.Errorf("%q: %w", v, err)
		}
		c.ShutdownTaints = append(c.ShutdownTaints, health.ShutdownTaint{Key: key, After: d})
		return nil
	})
	fs.BoolVar(&c.ApplyOutOfService, "apply-out-of-service", false, "taint a node "+corev1.TaintNodeOutOfService+"=nodeshutdown:NoExecute once a --shutdown-taint fences it (Kubernetes then force-detaches its volumes), and remove the taints it applied once their node is Ready and its old pods are gone; needs --shutdown-taint, the cluster-wide mode, and node patch rights (config/out-of-service)")
	fs.BoolVar(&c.FenceLease, "fence-lease", false, "free a dead pod that fences itself (annotations "+fencing.AnnotationLease+" and "+fencing.AnnotationDeadline+") once its Lease, read live, has been unrenewed for its duration plus the deadline plus 2 s; needs get on leases in the namespaces acted in (config/fence-lease). It frees pods only: it never leads to --apply-out-of-service's taint")
	fs.Func("network-fence-driver", "a CSI driver (such as rbd.csi.ceph.com) whose csi-addons NetworkFences, read live, prove a node cut off its storage once every address of the node is fenced; repeat for several. Needs list on networkfences (config/fence-network). None by default", func(v string) error {
		return addFenceName(&c.NetworkFenceDrivers, "--network-fence-driver", v)
	})
	fs.Func("network-fence-class", "a NetworkFenceClass whose NetworkFences count, as for --network-fence-driver; repeat for several", func(v string) error {
		return addFenceName(&c.NetworkFenceClasses, "--network-fence-class", v)
	})
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if !c.LeaderElect {
		var set []string
		fs.Visit(func(f *flag.Flag) {
			if strings.HasPrefix(f.Name, "leader-election-") {
				set = append(set, "--"+f.Name)
			}
		})
		if len(set) > 0 {
			return c, fmt.Errorf("%s with --leader-elect=false: without leader election they would do nothing", strings.Join(set, ", "))
		}
	} else if err := c.LeaderElection.check(); err != nil {
		return c, err
	}
	if watch != "" {
		selectorSet := false
		fs.Visit(func(f *flag.Flag) { selectorSet = selectorSet || f.Name == "namespace-selector" })
		if selectorSet {
			return c, errors.New("--watch-namespaces with --namespace-selector: the selector would do nothing, since the namespaces named are the ones acted in")
		}
		seen := map[string]bool{}
		for _, ns := range strings.Split(watch, ",") {
			ns = strings.TrimSpace(ns)
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				return c, fmt.Errorf("--watch-namespaces: %q is not a namespace name: %s", ns, strings.Join(msgs, "; "))
			}
			if seen[ns] {
				return c, fmt.Errorf("--watch-namespaces: %q is named twice", ns)
			}
			seen[ns] = true
			c.WatchNamespaces = append(c.WatchNamespaces, ns)
		}
		c.Namespaces = ""
	} else if _, err := namespaceSelector(c.Namespaces); err != nil {
		return c, err
	}
	switch {
	case c.MaxDeletes < 0:
		return c, errors.New("--max-force-deletes must not be negative")
	case c.DeleteWindow <= 0:
		return c, errors.New("--force-delete-window must be positive")
	case !(c.BreakerShare > 0 && c.BreakerShare <= 1): // NaN too
		return c, errors.New("--breaker-unhealthy-share must be in (0, 1]")
	case c.BreakerRecheck <= 0:
		return c, errors.New("--breaker-recheck-interval must be positive")
	case c.MemoryCapacity < 1:
		return c, errors.New("--memory-capacity must be at least 1")
	case c.BreakerMin < 1:
		return c, errors.New("--breaker-min-unhealthy must be at least 1")
	case c.MaxConcurrentWork < 1:
		return c, errors.New("--workers must be at least 1")
	case !(c.KubeAPIQPS > 0) || math.IsInf(c.KubeAPIQPS, 0):
		return c, errors.New("--kube-api-qps must be a positive number")
	case c.KubeAPIBurst < 1:
		return c, errors.New("--kube-api-burst must be at least 1")
	case c.ApplyOutOfService && len(c.ShutdownTaints) == 0:
		return c, errors.New("--apply-out-of-service without --shutdown-taint would never apply a taint: name the evidence it acts on")
	case c.ApplyOutOfService && len(c.WatchNamespaces) > 0:
		return c, errors.New("--apply-out-of-service with --watch-namespaces: the controller would not see every pod of a node, and could never remove a taint it applied")
	}
	return c, nil
}

// namespaceSelector parses --namespace-selector, refusing an empty one,
// which would select every namespace.
func namespaceSelector(s string) (labels.Selector, error) {
	if err := checkSelectorSyntax(s); err != nil {
		return nil, err
	}
	selector, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("--namespace-selector: %w", err)
	}
	if selector.Empty() {
		return nil, errors.New("--namespace-selector is empty: it would select every namespace; give a label")
	}
	return selector, nil
}

// addFenceName adds v, a driver's or a class's name, to names, refusing an
// empty one and one named twice.
func addFenceName(names *[]string, flagName, v string) error {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return fmt.Errorf("%s: an empty name", flagName)
	case slices.Contains(*names, v):
		return fmt.Errorf("%s: %q is named twice", flagName, v)
	}
	*names = append(*names, v)
	return nil
}

// leaseNamespaces are the namespaces whose Leases the cache holds: the
// node Leases, for the Breaker, and with --fence-lease every namespace
// acted in (all of them in the cluster-wide mode), for the Lease fencer's
// LeaseWatch. The base ClusterRole's list and watch on leases covers them.
func leaseNamespaces(cfg Config) map[string]cache.Config {
	namespaces := map[string]cache.Config{corev1.NamespaceNodeLease: {}}
	switch {
	case !cfg.FenceLease:
	case len(cfg.WatchNamespaces) == 0:
		return map[string]cache.Config{cache.AllNamespaces: {}}
	default:
		for _, ns := range cfg.WatchNamespaces {
			namespaces[ns] = cache.Config{}
		}
	}
	return namespaces
}

// fencers builds the fencers the flags ask for, reading through live, the
// manager's API reader; seen, when not nil, says when each Lease's renewal
// arrived.
func fencers(cfg Config, live client.Reader, seen fencing.LeaseSightings) ([]health.Fencer, error) {
	var out []health.Fencer
	if cfg.FenceLease {
		leases, err := podhealthcr.NewLiveLeases(live)
		if err != nil {
			return nil, err
		}
		f, err := fencing.NewLeaseFencer(leases, fencing.LeaseOptions{Seen: seen})
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	if len(cfg.NetworkFenceDrivers) > 0 || len(cfg.NetworkFenceClasses) > 0 {
		fences, err := podhealthcr.NewLiveNetworkFences(live)
		if err != nil {
			return nil, err
		}
		f, err := fencing.NewNetworkFenceFencer(fences, fencing.NetworkFenceOptions{Drivers: cfg.NetworkFenceDrivers, Classes: cfg.NetworkFenceClasses})
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func main() {
	// The command line's own flag set: controller-runtime registers
	// --kubeconfig on it.
	fs := flag.CommandLine
	logOpts := bindLogFlags(fs)
	cfg, err := parseFlags(fs, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	if cfg.Version {
		fmt.Println(version.String("podhealth-controller"))
		return
	}
	// Structured JSON logs by default, as a cluster's log pipeline expects;
	// every line of the process through them.
	routeLogs(newLogger(logOpts, os.Stderr, time.Now), ctrl.SetLogger)
	err = run(cfg)
	if errors.Is(err, errStoppedUnsynced) {
		ctrl.Log.Info(err.Error())
		return
	}
	if err != nil {
		ctrl.Log.Error(err, "exiting")
		os.Exit(1)
	}
}

func run(cfg Config) error {
	var namespaces labels.Selector
	if len(cfg.WatchNamespaces) == 0 {
		var err error
		if namespaces, err = namespaceSelector(cfg.Namespaces); err != nil {
			return err
		}
	}
	// The pods of the namespaced mode's namespaces only; else of every
	// namespace.
	pods := cache.ByObject{Transform: controller.Transform}
	if len(cfg.WatchNamespaces) > 0 {
		pods.Namespaces = map[string]cache.Config{}
		for _, ns := range cfg.WatchNamespaces {
			pods.Namespaces[ns] = cache.Config{}
		}
	}
	watchErrs := &watchErrors{now: time.Now}
	restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS, restConfig.Burst = float32(cfg.KubeAPIQPS), cfg.KubeAPIBurst
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		LeaderElection:          cfg.LeaderElect,
		LeaderElectionID:        cfg.LeaderElection.ID,
		LeaderElectionNamespace: cfg.LeaderElectionNS,
		LeaseDuration:           &cfg.LeaderElection.LeaseDuration,
		RenewDeadline:           &cfg.LeaderElection.RenewDeadline,
		RetryPeriod:             &cfg.LeaderElection.RetryPeriod,
		// The leader gives up its Lease on a clean stop, so that the next
		// replica takes over at once.
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       metricsOptions(cfg),
		HealthProbeBindAddress:        cfg.ProbeAddr,
		PprofBindAddress:              cfg.PprofAddr,
		GracefulShutdownTimeout:       ptr.To(gracefulShutdown),
		Cache: cache.Options{
			DefaultWatchErrorHandler: watchErrs.handler,
			// Pods (cluster-wide, or the namespaced mode's) and nodes:
			// keep only what the rules read.
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Pod{}:  pods,
				&corev1.Node{}: {Transform: controller.Transform},
				// The Breaker's node heartbeats: the node Leases, and with
				// --fence-lease those of the namespaces acted in too.
				&coordinationv1.Lease{}: {Namespaces: leaseNamespaces(cfg), Transform: controller.Transform},
			},
		},
	})
	if err != nil {
		return err
	}
	// podhealth_breaker_open reads the Breaker's own state at each scrape,
	// over the Reconciler's view of the nodes, which exists only once the
	// Reconciler does: the observer it needs comes first.
	breakerNodes := &lateNodes{}
	breaker := health.Breaker{UnhealthyShare: cfg.BreakerShare, MinUnhealthy: cfg.BreakerMin}
	gaugeBreaker := breaker
	gaugeBreaker.Nodes = breakerNodes
	observer, err := metrics.NewObserver(ctrlmetrics.Registry, metrics.Options{Breaker: gaugeBreaker})
	if err != nil {
		return err
	}
	memory := health.NewMemory(health.MemoryOptions{Capacity: cfg.MemoryCapacity})
	if err := ctrlmetrics.Registry.Register(memoryShed(memory)); err != nil {
		return err
	}
	opts := controller.Options{
		Memory:          memory,
		Namespaces:      namespaces,
		WatchNamespaces: cfg.WatchNamespaces,
		DryRun:          cfg.DryRun,
		Breaker:         breaker,
		BreakerRecheck:  cfg.BreakerRecheck,
		Observer:        observer,
		Recorder:        mgr.GetEventRecorder("podhealth-controller"),

		ShutdownTaints:    cfg.ShutdownTaints,
		ApplyOutOfService: cfg.ApplyOutOfService,
	}
	var seen fencing.LeaseSightings
	if cfg.FenceLease {
		// When each renewal arrived, so that a self-fencing pod's wait
		// runs from its holder's last renewal, not from its eviction.
		informer, err := mgr.GetCache().GetInformer(context.Background(), &coordinationv1.Lease{}, cache.BlockUntilSynced(false))
		if err != nil {
			return err
		}
		if seen, err = kube.NewLeaseWatch(informer, nil); err != nil {
			return err
		}
	}
	if opts.Fencers, err = fencers(cfg, mgr.GetAPIReader(), seen); err != nil {
		return err
	}
	if cfg.MaxDeletes > 0 {
		if opts.Budget, err = health.NewDeleteBudget(cfg.MaxDeletes, cfg.DeleteWindow); err != nil {
			return err
		}
	}
	r, err := controller.New(mgr, opts)
	if err != nil {
		return err
	}
	breakerNodes.set(r.BreakerNodes())
	collectors := fencingHolds(r.FencingHolds)
	if cfg.ApplyOutOfService {
		collectors = append(collectors, outOfServiceCollector{stats: r.OutOfServiceStats})
	}
	for _, c := range collectors {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			return err
		}
	}
	if err := r.SetupWithManager(mgr, cfg.MaxConcurrentWork); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// Ready once the caches have synced: before that the controller knows
	// nothing to act on.
	if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return watchErrs.notSynced()
		}
		return nil
	}); err != nil {
		return err
	}
	synced := &cachesStarted{}
	if err := mgr.Add(synced); err != nil {
		return err
	}
	scope := []any{"namespaceSelector", cfg.Namespaces}
	if len(cfg.WatchNamespaces) > 0 {
		scope = []any{"watchNamespaces", cfg.WatchNamespaces}
	}
	ctrl.Log.Info("starting", append(scope, "dryRun", cfg.DryRun, "maxForceDeletes", cfg.MaxDeletes,
		"window", cfg.DeleteWindow.String(), "breakerShare", cfg.BreakerShare, "breakerMin", cfg.BreakerMin, "leaderElect", cfg.LeaderElect,
		"leaderElectionID", cfg.LeaderElection.ID, "leaseDuration", cfg.LeaderElection.LeaseDuration.String(),
		"shutdownTaints", fmt.Sprint(cfg.ShutdownTaints), "applyOutOfService", cfg.ApplyOutOfService,
		"fenceLease", cfg.FenceLease, "networkFenceDrivers", cfg.NetworkFenceDrivers, "networkFenceClasses", cfg.NetworkFenceClasses)...)
	return runUntilStopped(ctrl.SetupSignalHandler(), mgr.Start, synced.Synced, stopBound)
}

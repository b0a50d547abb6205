// Package health decides whether a workload's pods are healthy, and which of
// them died with their node and must be force-deleted.
//
// When a node fails, the taint-eviction controller marks its pods
// DisruptionTarget=True (reason DeletionByTaintManager) and deletes them
// gracefully (it does so for any untolerated NoExecute taint, on Ready nodes
// too); no kubelet is left to confirm, so they stay Terminating for
// ever. A Checker finds such pods, force-deletes them (grace period 0, with
// a UID precondition) and answers "healthy" only from the pods still alive.
//
// The package is pure decision logic: it uses the k8s.io/api and
// k8s.io/apimachinery types and logr, never client-go. Pods come from a
// PodSource and go through a Deleter; package podsource/kube binds both to
// client-go, and package podsource/fake gives an in-memory pair for tests.
// Its module, github.com/podhealth/podhealth, has these floors (go.mod):
// Go 1.22, k8s.io v0.31.0 (api, apimachinery, client-go) and logr v1.4.2.
//
// # Classification
//
// Rules give each pod one Verdict: Alive, Terminating (a graceful deletion
// in progress, never force-deleted), Finished (stopped in a terminal phase,
// left alone), Dead (force-deleted) or, with Options.ReplaceUnreachable,
// Unreachable (on a node the node-lifecycle controller marked unreachable:
// not alive, never force-deleted on that evidence). DefaultRules documents the default
// rule set and its order; the first rule with an opinion decides, and a pod
// no rule matches is Alive.
//
// # Decision table
//
// Check lists the pods once, classifies them, force-deletes every dead pod,
// and answers:
//
//	row | alive       | dead | force deletes                     | healthy | err
//	----+-------------+------+-----------------------------------+---------+------------------------------
//	D1  | 0           | 0    | none                              | false   | nil
//	D2  | >=1         | 0    | none                              | true    | nil
//	D3  | >=1         | >=1  | all succeed or pod already gone   | true    | nil
//	D4  | 0           | >=1  | all succeed or pod already gone   | false   | nil
//	D5  | any         | >=1  | at least one fails or can't be judged | false | errors.Join of a *DeleteError per failed pod, *FenceError, ErrClaimUnavailable, ErrUnidentifiedPod
//	D6  | source fails|      | none                              | false   | *ListError wrapping the source's error
//	D7  | context ends|      | stops at once                     | false   | wraps the context's error
//	D8  | >=1         | >=1  | held back, the others as D3       | true    | nil
//	D9  | 0           | >=1  | held back, the others as D4       | false   | nil
//	D10 | 0, >=1 Unreachable | any | as D4/D9, none for Unreachable | false | nil
//	D11 | >=1, >=1 Unreachable | any | as D3/D8, none for Unreachable | true | nil
//
// Terminating, Finished and Unreachable pods count in neither column, and neither do dead
// pods that are held back (D8, D9; see Evidence before force). "Succeed or pod
// already gone" covers the outcomes ForceDeleted, WasAlreadyGone (NotFound),
// NameReused (the UID precondition failed: a newer pod holds the name and is
// left alone), DeletedEarlier and BlockedByFinalizers (see below).
//
// D3 is deliberate: a workload with a live pod whose dead pods were cleaned
// up is exactly as healthy as one that never had dead pods, so the caller
// does not rebuild it. On D1 and D4 the caller creates a replacement.
//
// In D5 every dead pod is still attempted; each *DeleteError unwraps to the
// Deleter's own error, so errors.Is, errors.As and apierrors.IsXxx reach it.
// A dead pod without a name or a UID is judged like any other, but held back
// (HeldUnidentified): without a UID precondition its DELETE could hit a
// newer pod, and every Deleter refuses it too. No API server serves such a
// pod, so the check fails as in D5, with an error wrapping
// ErrUnidentifiedPod that names the pod: the caller's source (a fake client
// that sets no UIDs) is wrong, and a silent hold would hide it. In D7 a context that is done
// before the check lists nothing; one that ends between force deletes leaves
// the remaining dead pods NotAttempted. A source that returns a nil pod
// fails the check with a *ListError (D6), and nothing is deleted.
//
// # The pipeline
//
// Each listed pod goes Pod → Verdict (the first rule with an opinion) →
// Outcome (what the Checker did) → PodReport, which is built once per pod
// and check and handed to the Report (CheckReport) and the Observer.
//
// # Evidence before force
//
// A force delete frees a pod's name and its volume claims at once. If the
// "dead" node is only partitioned, its containers still run: harmless for a
// stateless server, two writers for a stateful one. So a dead pod is held
// back (Outcome HeldBack, with PodReport.HeldBack saying why: a Hold with a
// HoldReason to switch on and a Detail for people) when:
//
//   - it carries the annotation podhealth.io/force-delete=never
//     (HeldByAnnotation);
//   - it is malformed: two of its conditions share a type, which the API
//     server never serves (HeldMalformed);
//   - it has no name or no UID (HeldUnidentified);
//   - Options.Fencing says it needs fencing evidence (by default: its
//     AnnotationWriters says "single"; or it is owned by a StatefulSet,
//     mounts a ReadWriteOnce or ReadWriteOncePod claim or an inline volume
//     that one node writes at a time, or, when no ReplicaSet, Job or
//     DaemonSet controls it, mounts any claim or shared file system; see
//     FenceStateful) and neither its verdict nor any Fencer proves that its
//     containers cannot run: the built-in ones read the node (NodeGone or
//     NodeOutOfService, or, when named in Options.ShutdownTaints, not Ready
//     under such a taint, the cloud's TaintCloudShutdown say, for its
//     After) and the kubelet's terminal phase; Options.Fencers add the
//     proof that the workload, its storage or a fencing tool holds
//     (HeldForFencing);
//   - the Breaker is open: an unusual share of the nodes of the cluster or of
//     the pod's zone is not Ready, which points to a control-plane or
//     network problem rather than to failed nodes (HeldByBreaker);
//   - the DeleteBudget of force deletes per window is spent; Report.RetryAfter
//     says when to check again (HeldByBudget).
//
// Node evidence comes through the optional Options.Nodes (a node cache, or
// live reads) and Options.LiveNodes (a live read, the only proof that a node
// is gone). What a node says is decided in one place, NodeStateOf, which
// every rule and the Breaker ask: a node whose Ready condition is True is
// NodeReady whatever taints are left on it. A NodeGetter that cannot answer
// about any node (ErrNodesUnavailable) is asked once per check, and
// Report.NodeEvidence says so.
// TaintEvicted uses it to tell a failed node from a Ready one (without it, a
// taint-evicted pod is dead only past its deletionTimestamp on the Checker's
// clock, and Report.RetryAfter says when that is); NodeGone calls dead any pod whose node a live read confirms gone;
// OutOfService and TerminatingTooLong call terminating pods dead on a node
// that is not Ready. Without node evidence those three have no opinion, and
// pods that need fencing are held back.
//
// # Stale caches
//
// A lagging source may still list a pod that was already force-deleted
// (same UID). The Checker's Memory remembers each UID it deleted, for a
// bounded time and count (see MemoryOptions): such a pod counts as deleted
// (DeletedEarlier) and is not deleted again. When finalizers hold the pod,
// it is reported BlockedByFinalizers and not deleted again either. A failed
// or held-back delete is not remembered, so the next check tries it again.
//
// # Concurrency
//
// Checker, Memory and DeleteBudget are safe for concurrent use; Hold,
// Verdict, PodReport and Report are values. A Checker must come from New
// (the zero Checker answers an error); the zero Memory has the default
// bounds; a DeleteBudget must come from NewDeleteBudget. Concurrent
// checks that meet the same dead pod send a single DELETE and share its
// outcome. Panics in dependencies are not recovered and leave nothing held;
// see Checker.
package health

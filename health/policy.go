package health

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationForceDelete, set to "never" on a pod, opts that pod out: a
// Checker never force-deletes it, whatever its verdict.
const AnnotationForceDelete = "podhealth.io/force-delete"

// forceDeleteNever is the value of AnnotationForceDelete that opts out.
const forceDeleteNever = "never"

// Fencing says which pods need fencing evidence before a force delete:
// proof that their containers cannot run any more, from a Fencer (the
// node is gone, or out of service and not Ready, or, when
// Options.ShutdownTaints names it, not Ready under an authority's shutdown
// taint such as the cloud's TaintCloudShutdown, which is off by default;
// the kubelet reported the pod stopped; one of Options.Fencers proved
// it), rather than the word of a controller that the node is unreachable,
// which a partitioned node also is. A force delete frees the pod's name
// and its volume claims at once: for a stateful pod on a node that still
// runs, that means two writers.
type Fencing int

const (
	// FenceStateful, the default, requires fencing evidence for stateful
	// pods. A pod states it itself with AnnotationWriters: "single" needs
	// fencing, "many" does not, and any other value needs it (fail
	// closed). A pod that carries podhealth.io/fence-lease (the Lease
	// protocol of fencing.LeaseFencer) has declared one writer and needs
	// fencing, whatever AnnotationWriters says. Without either annotation
	// a pod is stateful when:
	//   - it is owned by a StatefulSet;
	//   - it mounts an inline volume that one node at a time writes. The
	//     inline types, by their field names in the pod spec, are the
	//     disks and LUNs attached to one node: iscsi, fc, rbd, cinder,
	//     awsElasticBlockStore, gcePersistentDisk, azureDisk,
	//     vsphereVolume, portworxVolume, photonPersistentDisk, scaleIO,
	//     storageos and flocker; csi, whose driver may attach such a disk;
	//     and flexVolume, whose driver is unknown;
	//   - its controller is not a ReplicaSet, a Job or a DaemonSet (an
	//     operator's custom resource, say, or none at all) and it mounts
	//     any claim, generic ephemeral volume or shared file system (nfs,
	//     cephfs, glusterfs, azureFile, quobyte): an access mode says
	//     what the storage allows, not how many writers the application
	//     tolerates, and nobody vouches for this one;
	//   - it is owned by one of those three and mounts a ReadWriteOnce or
	//     ReadWriteOncePod claim (or a claim whose access modes cannot be
	//     read: no Options.Claims, a read that fails, a claim that lists
	//     no mode), or a generic ephemeral volume whose claim template
	//     asks for one of those modes or for none.
	// Volumes that live on the node (emptyDir, hostPath, configMap,
	// secret, projected, downwardAPI, gitRepo, image) cannot be written
	// from another node. Stateless pods may go on taint-eviction evidence.
	FenceStateful Fencing = iota
	// FenceAlways requires fencing evidence for every pod, whatever its
	// annotation.
	FenceAlways
	// FenceNever lets every pod go on its verdict alone, whatever its
	// annotation. Use it only for workloads that tolerate two copies
	// running at once.
	FenceNever
)

// AnnotationWriters, on a pod, states how many copies of it may write at
// once, for FenceStateful: "single" (it needs fencing evidence) or "many"
// (it does not). It wins over what the policy would guess from the pod's
// owner and volumes; a value that is neither needs fencing.
const AnnotationWriters = "podhealth.io/writers"

// annotationFenceLease is fencing.AnnotationLease: a pod that carries it
// states that it writes only while it holds that Lease, so FenceStateful
// holds it for fencing evidence whatever else it says.
const annotationFenceLease = "podhealth.io/fence-lease"

func (f Fencing) String() string {
	switch f {
	case FenceStateful:
		return "FenceStateful"
	case FenceAlways:
		return "FenceAlways"
	case FenceNever:
		return "FenceNever"
	default:
		return "Fencing(?)"
	}
}

// ClaimGetter gets a PersistentVolumeClaim, so that the policy can read its
// access modes. The claim returned must not be mutated. Implementations
// must be safe for concurrent use.
type ClaimGetter interface {
	GetClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
}

// policy decides which dead pods may be force-deleted on the evidence at
// hand (Options.Fencing and Options.Claims).
type policy struct {
	fencing Fencing
	// claims tells the access modes of the claims a pod mounts. Nil means
	// they are unknown, and a pod that mounts any claim needs fencing.
	claims ClaimGetter
	// shutdownTaints are Options.ShutdownTaints: more fencing evidence.
	shutdownTaints []ShutdownTaint
}

// decision is the policy stage's answer about one dead pod, which the
// release stage carries out.
type decision struct {
	// deletedEarlier: the Memory holds the pod as force-deleted, so it is
	// not decided again.
	deletedEarlier bool
	hold           Hold   // why it stays; the zero Hold lets it go
	proof          *Fence // the fencer's proof that let it go, if one did
	// err, with a hold, is a read that failed on the way (a claim's,
	// wrapping ErrClaimUnavailable, or a fencer's), or the source's fault
	// (ErrUnidentifiedPod): the pod is held, and the check fails so that
	// its caller retries.
	err error
	// fencersFailed joins the fencers that failed before another proved
	// the pod fenced: no reason to hold it, but worth a log line.
	fencersFailed error
}

// decide is the policy stage for one dead pod: whether it may be
// force-deleted now. In order: a pod without a name or a UID is held (its
// DELETE could carry no UID precondition); one the Memory holds as
// force-deleted is not decided again; then its annotation, its malformed
// status and the fencing it needs (asking the fencers, evidence_fencer.go)
// may hold it. The breaker, which holds every pod alike, is the release
// stage's (release_breaker.go).
func (k *check) decide(pod *corev1.Pod, v Verdict) decision {
	if pod.Name == "" || pod.UID == "" {
		// No API server serves such a pod, so the caller's source is wrong
		// (a fake client that sets no UIDs, a transform that drops them):
		// fail the check, so that it is seen rather than silently held.
		return decision{
			hold: Hold{Reason: HeldUnidentified, Detail: "the pod has no name or no UID, so its force delete could not carry a UID precondition"},
			err: fmt.Errorf("podhealth: dead pod %q of namespace %q (uid %q): %w (no API server serves such a pod: does the source's client set UIDs? client-go's fake clientset stores pods as given, so its fixtures need metadata.uid; podsource/fake and controller-runtime's podsource/controllerruntime/fakeapi set one)",
				pod.Name, pod.Namespace, pod.UID, ErrUnidentifiedPod),
		}
	}
	if !k.dryRun && k.memory.remembers(pod.UID, k.time()) {
		return decision{deletedEarlier: true}
	}
	if optedOut(pod) {
		return decision{hold: Hold{Reason: HeldByAnnotation, Detail: AnnotationForceDelete + "=" + forceDeleteNever}}
	}
	if why := malformed(pod); why != "" {
		return decision{hold: Hold{Reason: HeldMalformed, Detail: why}}
	}
	var d decision
	if !v.Fenced {
		if why, err := k.policy.needsFencing(k.ctx, pod); why != "" {
			proof, waiting, fenceErr := k.fence(pod, v)
			switch {
			case proof != nil:
				d.proof, d.fencersFailed = proof, fenceErr
			case waiting != "":
				return decision{hold: Hold{Reason: HeldForFencing, Detail: why + "; " + waiting}, err: errors.Join(err, fenceErr)}
			default:
				return decision{hold: Hold{Reason: HeldForFencing, Detail: why}, err: errors.Join(err, fenceErr)}
			}
		}
	}
	return d
}

// needsFencing returns why pod needs fencing evidence, or "" if it does not.
// A claim whose read failed needs it (fail closed), and comes with the
// error, which wraps ErrClaimUnavailable: a failed read is a reason to
// retry, not a fact about the pod.
func (p policy) needsFencing(ctx context.Context, pod *corev1.Pod) (string, error) {
	switch p.fencing {
	case FenceNever:
		return "", nil
	case FenceAlways:
		return "the policy requires fencing for every pod", nil
	}
	why, err := p.statefulness(ctx, pod)
	if why == "" && err == nil {
		if _, ok := pod.Annotations[annotationFenceLease]; ok {
			// A pod that writes only while it holds a Lease has declared
			// one writer, whatever its owner, volumes and AnnotationWriters
			// say: its Lease, not a guess, says when it stopped.
			return "states the Lease protocol (" + annotationFenceLease + "): one writer", nil
		}
	}
	return why, err
}

// statefulness is needsFencing under FenceStateful, but for the Lease
// protocol.
func (p policy) statefulness(ctx context.Context, pod *corev1.Pod) (string, error) {
	switch writers, stated := pod.Annotations[AnnotationWriters]; {
	case !stated:
	case writers == "single":
		return AnnotationWriters + "=single", nil
	case writers == "many":
		return "", nil
	default:
		return fmt.Sprintf("annotation %s=%q is neither single nor many", AnnotationWriters, writers), nil
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "StatefulSet" {
			return "owned by StatefulSet " + ref.Name, nil
		}
	}
	vouched := vouchedFor(pod)
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if kind := singleWriterInline(&vol.VolumeSource); kind != "" {
			return "mounts single-writer inline " + kind + " volume " + vol.Name, nil
		}
		if !vouched {
			if what := sharedStorage(vol); what != "" {
				return unvouched(pod) + " and mounts " + what, nil
			}
			continue
		}
		switch {
		case vol.PersistentVolumeClaim != nil:
			if why, err := p.claimNeedsFencing(ctx, pod.Namespace, vol.PersistentVolumeClaim.ClaimName); why != "" {
				return why, err
			}
		case vol.Ephemeral != nil:
			if why := ephemeralNeedsFencing(vol); why != "" {
				return why, nil
			}
		}
	}
	return "", nil
}

// vouchedFor reports whether the pod's controller is a ReplicaSet, a Job
// or a DaemonSet of Kubernetes' own API groups: workloads whose pods are
// interchangeable copies, which may share storage that takes many writers.
func vouchedFor(pod *corev1.Pod) bool {
	ref := controllerOf(pod)
	if ref == nil {
		return false
	}
	group, _, _ := strings.Cut(ref.APIVersion, "/")
	switch ref.Kind {
	case "ReplicaSet", "DaemonSet":
		return group == "apps"
	case "Job":
		return group == "batch"
	}
	return false
}

func controllerOf(pod *corev1.Pod) *metav1.OwnerReference {
	for i := range pod.OwnerReferences {
		if ref := &pod.OwnerReferences[i]; ref.Controller != nil && *ref.Controller {
			return ref
		}
	}
	return nil
}

// unvouched says whose pod nobody vouches for.
func unvouched(pod *corev1.Pod) string {
	if ref := controllerOf(pod); ref != nil {
		return "controlled by " + ref.Kind + " " + ref.Name + ", not a ReplicaSet, Job or DaemonSet,"
	}
	return "controlled by no ReplicaSet, Job or DaemonSet"
}

// sharedStorage names the storage of vol that outlives the node (a claim,
// a generic ephemeral volume, a shared file system), or "".
func sharedStorage(vol *corev1.Volume) string {
	src := &vol.VolumeSource
	switch {
	case src.PersistentVolumeClaim != nil:
		return "claim " + src.PersistentVolumeClaim.ClaimName
	case src.Ephemeral != nil:
		return "ephemeral volume " + vol.Name
	case src.NFS != nil:
		return "shared nfs volume " + vol.Name
	case src.CephFS != nil:
		return "shared cephfs volume " + vol.Name
	case src.Glusterfs != nil:
		return "shared glusterfs volume " + vol.Name
	case src.AzureFile != nil:
		return "shared azureFile volume " + vol.Name
	case src.Quobyte != nil:
		return "shared quobyte volume " + vol.Name
	}
	return ""
}

// singleWriterInline returns the type of an inline volume that one node at
// a time writes, by its field name in the pod spec, or "" (see
// FenceStateful). Some of these fields are deprecated, but pods still carry
// them, and the API still serves them.
func singleWriterInline(src *corev1.VolumeSource) string {
	switch {
	case src.ISCSI != nil:
		return "iscsi"
	case src.FC != nil:
		return "fc"
	case src.RBD != nil:
		return "rbd"
	case src.Cinder != nil:
		return "cinder"
	case src.AWSElasticBlockStore != nil:
		return "awsElasticBlockStore"
	case src.GCEPersistentDisk != nil:
		return "gcePersistentDisk"
	case src.AzureDisk != nil:
		return "azureDisk"
	case src.VsphereVolume != nil:
		return "vsphereVolume"
	case src.PortworxVolume != nil:
		return "portworxVolume"
	case src.CSI != nil:
		return "csi"
	case src.FlexVolume != nil:
		return "flexVolume"
	case src.PhotonPersistentDisk != nil:
		return "photonPersistentDisk"
	case src.ScaleIO != nil:
		return "scaleIO"
	case src.StorageOS != nil:
		return "storageos"
	case src.Flocker != nil:
		return "flocker"
	}
	return ""
}

// malformed returns why pod is not an object the API server serves, or "":
// Kubernetes keeps at most one condition of each type, and a pod with two
// was not written by it, so nothing in it can be trusted to force-delete on.
// Every condition type counts, known or not. It is asked only about dead
// pods, so only they pay for it.
func malformed(pod *corev1.Pod) string {
	conds := pod.Status.Conditions
	if len(conds) > 16 {
		seen := make(map[corev1.PodConditionType]struct{}, len(conds))
		for i := range conds {
			if _, dup := seen[conds[i].Type]; dup {
				return duplicateCondition(conds[i].Type)
			}
			seen[conds[i].Type] = struct{}{}
		}
		return ""
	}
	for i := 1; i < len(conds); i++ {
		for j := range i {
			if conds[i].Type == conds[j].Type {
				return duplicateCondition(conds[i].Type)
			}
		}
	}
	return ""
}

func duplicateCondition(t corev1.PodConditionType) string {
	return fmt.Sprintf("condition %q appears more than once; Kubernetes keeps one of each type", string(t))
}

func (p policy) claimNeedsFencing(ctx context.Context, namespace, name string) (string, error) {
	if p.claims == nil {
		return "mounts claim " + name + " whose access modes are unknown", nil
	}
	claim, err := p.claims.GetClaim(ctx, namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		// Gone for good, not a passing fault: unknown, and no retry helps.
		return fmt.Sprintf("mounts claim %s whose access modes could not be read: %v", name, err), nil
	case err != nil:
		return fmt.Sprintf("mounts claim %s whose access modes could not be read: %v", name, err),
			fmt.Errorf("podhealth: claim %s/%s: %w: %w", namespace, name, ErrClaimUnavailable, err)
	case claim == nil:
		return "mounts claim " + name + " whose access modes are unknown (the claim getter returned nothing)", nil
	}
	modes := claim.Status.AccessModes
	if len(modes) == 0 {
		modes = claim.Spec.AccessModes
	}
	switch {
	case len(modes) == 0:
		// A getter that swallows NotFound, or a cache transform that
		// strips the spec: modes that cannot be read count as stateful.
		return "mounts claim " + name + " whose access modes cannot be read (the claim has none)", nil
	case single(modes):
		return "mounts single-writer claim " + name, nil
	}
	return "", nil
}

// ephemeralNeedsFencing returns why a pod's generic ephemeral volume needs
// fencing, or "": its claim template asks for a single-writer mode, or for
// no mode at all (modes that cannot be read count as stateful).
func ephemeralNeedsFencing(vol *corev1.Volume) string {
	tmpl := vol.Ephemeral.VolumeClaimTemplate
	switch {
	case tmpl == nil || len(tmpl.Spec.AccessModes) == 0:
		return "mounts ephemeral volume " + vol.Name + " whose access modes cannot be read (its claim template has none)"
	case single(tmpl.Spec.AccessModes):
		return "mounts a single-writer ephemeral claim in volume " + vol.Name
	}
	return ""
}

// single reports whether the access modes allow one writer node at most.
func single(modes []corev1.PersistentVolumeAccessMode) bool {
	for _, m := range modes {
		if m == corev1.ReadWriteOnce || m == corev1.ReadWriteOncePod {
			return true
		}
	}
	return false
}

func optedOut(pod *corev1.Pod) bool {
	return pod.Annotations[AnnotationForceDelete] == forceDeleteNever
}

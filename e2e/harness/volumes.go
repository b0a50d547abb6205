package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// VolumeControllers are the kube-controller-manager controllers of the
// volume path, which Options.Volumes runs: the PV binder binds claims to volumes, the
// attach-detach controller creates and deletes VolumeAttachments as pods
// come and go (and force-detaches from a node that is out of service, or
// once its unmount wait ends), and the StatefulSet controller recreates a
// StatefulSet's pods.
var VolumeControllers = []string{
	"persistentvolume-binder-controller",
	"persistentvolume-attach-detach-controller",
	"statefulset-controller",
}

// volumeControllerArgs adds VolumeControllers to the controller-manager's
// --controllers when on (a repeated --controllers adds to the list).
func volumeControllerArgs(on bool) []string {
	if !on {
		return nil
	}
	return []string{"--controllers=" + strings.Join(VolumeControllers, ",")}
}

// CSIDriverName is the CSI driver of the harness's volumes.
const CSIDriverName = "csi.e2e.podhealth.io"

// attacherFinalizer is the finalizer the external-attacher puts on the
// VolumeAttachments it handles: external-attacher/<driver, dots as dashes>.
const attacherFinalizer = "external-attacher/csi-e2e-podhealth-io"

// UniqueVolumeName is the name the attach-detach controller and the
// kubelet give a CSI volume in a node's status (volumesAttached,
// volumesInUse): kubernetes.io/csi/<driver>^<volume handle>.
func UniqueVolumeName(handle string) corev1.UniqueVolumeName {
	return corev1.UniqueVolumeName("kubernetes.io/csi/" + CSIDriverName + "^" + handle)
}

// CreateCSIDriver creates the CSIDriver of CSIDriverName with
// attachRequired, so that the attach-detach controller attaches its
// volumes through VolumeAttachments.
func (cp *ControlPlane) CreateCSIDriver(ctx context.Context) error {
	_, err := cp.client.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: CSIDriverName},
		Spec:       storagev1.CSIDriverSpec{AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(false)},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("harness: creating CSIDriver %s: %w", CSIDriverName, err)
	}
	return nil
}

// CreateVolume creates a ReadWriteOnce PersistentVolume of CSIDriverName
// named after the claim, and the claim namespace/claim that it is
// reserved for, as an admin provisions a volume statically; the PV binder
// binds the two.
func (cp *ControlPlane) CreateVolume(ctx context.Context, namespace, claim string) error {
	pvName := "pv-" + namespace + "-" + claim
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	size := resource.MustParse("1Gi")
	_, err := cp.client.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:                   rwo,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: namespace, Name: claim},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: CSIDriverName, VolumeHandle: "vol-" + namespace + "-" + claim, FSType: "ext4",
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("harness: creating PersistentVolume %s: %w", pvName, err)
	}
	_, err = cp.client.CoreV1().PersistentVolumeClaims(namespace).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: claim},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      rwo,
			StorageClassName: ptr.To(""),
			VolumeName:       pvName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("harness: creating PersistentVolumeClaim %s/%s: %w", namespace, claim, err)
	}
	return nil
}

// AttachEventKind is what an [AttachEvent] records.
type AttachEventKind string

const (
	// VolumeAttached: the attacher attached the volume to the node and set
	// the VolumeAttachment's status.attached.
	VolumeAttached AttachEventKind = "attach"
	// VolumeDetached: the attacher detached the volume from the node and
	// released the VolumeAttachment's finalizer.
	VolumeDetached AttachEventKind = "detach"
)

// AttachEvent is one entry of an [Attacher]'s log.
type AttachEvent struct {
	At     time.Time
	Kind   AttachEventKind
	Volume string // the PersistentVolume's name
	Node   string
}

// Attacher models kubernetes-csi's external-attacher with a CSI driver
// whose ControllerPublish and ControllerUnpublish succeed at once, for the
// VolumeAttachments of CSIDriverName. As the external-attacher does, for
// each VolumeAttachment it
//   - puts its finalizer on it, then attaches the volume (records
//     VolumeAttached) and sets status.attached to true;
//   - once it is being deleted, detaches the volume (records VolumeDetached)
//     and removes its finalizer, so that the API server deletes it.
//
// It leaves out what the e2e tests do not read: the finalizer the real one
// puts on the PersistentVolume, attach errors and metadata, and retries
// with backoff (it retries each VolumeAttachment on the next event or
// within a second). It is safe for concurrent use, and stops when the test
// ends.
type Attacher struct {
	client kubernetes.Interface

	mu     sync.Mutex
	events []AttachEvent
	// attached are the volumes attached now, by VolumeAttachment name.
	attached map[string]AttachEvent
}

// StartAttacher starts an Attacher. It stops the test with t.Fatal if its
// client or watch cannot be made.
func (cp *ControlPlane) StartAttacher(ctx context.Context) *Attacher {
	cp.t.Helper()
	config := rest.CopyConfig(cp.config)
	config.UserAgent = "podhealth-e2e-external-attacher"
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		cp.t.Fatalf("harness: attacher client: %v", err)
	}
	a := &Attacher{client: client, attached: map[string]AttachEvent{}}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.run(ctx)
	}()
	cp.t.Cleanup(func() {
		cancel()
		<-done
	})
	return a
}

// Events returns a copy of the attacher's log, oldest first.
func (a *Attacher) Events() []AttachEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.events)
}

func (a *Attacher) run(ctx context.Context) {
	for ctx.Err() == nil {
		list, err := a.client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		for i := range list.Items {
			a.handle(ctx, &list.Items[i])
		}
		w, err := a.client.StorageV1().VolumeAttachments().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, TimeoutSeconds: ptr.To[int64](1)})
		if err != nil {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if va, ok := ev.Object.(*storagev1.VolumeAttachment); ok && ev.Type != watch.Deleted {
				a.handle(ctx, va)
			}
		}
		w.Stop()
	}
}

// handle brings one VolumeAttachment of the driver in line with its spec.
// An API error leaves it for the next event or list.
func (a *Attacher) handle(ctx context.Context, va *storagev1.VolumeAttachment) {
	if va.Spec.Attacher != CSIDriverName {
		return
	}
	pv := ptr.Deref(va.Spec.Source.PersistentVolumeName, "")
	vas := a.client.StorageV1().VolumeAttachments()
	if va.DeletionTimestamp != nil {
		if !slices.Contains(va.Finalizers, attacherFinalizer) {
			return
		}
		a.record(va.Name, AttachEvent{Kind: VolumeDetached, Volume: pv, Node: va.Spec.NodeName})
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"finalizers":      slices.DeleteFunc(slices.Clone(va.Finalizers), func(f string) bool { return f == attacherFinalizer }),
			"resourceVersion": va.ResourceVersion,
		}})
		_, _ = vas.Patch(ctx, va.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return
	}
	if va.Status.Attached {
		return
	}
	if !slices.Contains(va.Finalizers, attacherFinalizer) {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"finalizers":      append(slices.Clone(va.Finalizers), attacherFinalizer),
			"resourceVersion": va.ResourceVersion,
		}})
		updated, err := vas.Patch(ctx, va.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return
		}
		va = updated
	}
	a.record(va.Name, AttachEvent{Kind: VolumeAttached, Volume: pv, Node: va.Spec.NodeName})
	status := va.DeepCopy()
	status.Status.Attached = true
	_, _ = vas.UpdateStatus(ctx, status, metav1.UpdateOptions{})
}

// record logs e unless it repeats the attachment's state: a retried
// attach or detach attaches or detaches once.
func (a *Attacher) record(name string, e AttachEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, on := a.attached[name]
	switch {
	case e.Kind == VolumeAttached && on, e.Kind == VolumeDetached && !on:
		return
	case e.Kind == VolumeAttached:
		a.attached[name] = e
	default:
		delete(a.attached, name)
	}
	e.At = time.Now()
	a.events = append(a.events, e)
}

// claimVolumes returns the unique names of the CSI volumes of pod's
// claims, and false when one cannot be resolved yet (a claim not bound,
// or a read that failed): the kubelet then does not start the pod.
func (k *Kubelet) claimVolumes(ctx context.Context, pod *corev1.Pod) ([]corev1.UniqueVolumeName, bool) {
	if !k.volumes {
		return nil, true
	}
	var names []corev1.UniqueVolumeName
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc, err := k.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
		if err != nil || pvc.Spec.VolumeName == "" {
			return nil, false
		}
		pv, err := k.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil || pv.Spec.CSI == nil {
			return nil, false
		}
		names = append(names, corev1.UniqueVolumeName("kubernetes.io/csi/"+pv.Spec.CSI.Driver+"^"+pv.Spec.CSI.VolumeHandle))
	}
	return names, true
}

// attachedTo reports whether every volume is in the node's
// status.volumesAttached, which the attach-detach controller sets once
// the volume's VolumeAttachment is attached.
func attachedTo(node *corev1.Node, volumes []corev1.UniqueVolumeName) bool {
	for _, v := range volumes {
		if !slices.ContainsFunc(node.Status.VolumesAttached, func(a corev1.AttachedVolume) bool { return a.Name == v }) {
			return false
		}
	}
	return true
}

// markInUse adds volumes to the node's status.volumesInUse before the
// kubelet mounts them, as the kubelet's volume manager does: the
// attach-detach controller then holds a detach back for as long as the
// node lists them, whatever happens to the node next. It reports whether
// the node lists them now; the pod waits for the next sync otherwise.
func (k *Kubelet) markInUse(ctx context.Context, volumes []corev1.UniqueVolumeName) bool {
	k.mu.Lock()
	inUse := slices.Clone(k.reportedInUse)
	missing := false
	for _, v := range volumes {
		if !slices.Contains(inUse, v) {
			inUse, missing = append(inUse, v), true
		}
	}
	k.mu.Unlock()
	if !missing {
		return true
	}
	slices.Sort(inUse)
	if k.patchVolumesInUse(ctx, inUse) != nil {
		return false
	}
	k.mu.Lock()
	k.reportedInUse, k.inUseReported, k.hadVolumes = inUse, true, true
	k.mu.Unlock()
	return true
}

// reportVolumesInUse sets the node's status.volumesInUse to the volumes
// of the running containers when it changed since the last report, as the
// kubelet does before it mounts a volume and after it unmounts one: the
// attach-detach controller detaches no volume that a node still lists,
// until its unmount wait ends or the node is out of service. A failure is
// retried at the next sync.
func (k *Kubelet) reportVolumesInUse(ctx context.Context) {
	k.mu.Lock()
	var inUse []corev1.UniqueVolumeName
	for _, e := range k.running {
		inUse = append(inUse, e.Volumes...)
	}
	slices.Sort(inUse)
	inUse = slices.Compact(inUse)
	same := slices.Equal(inUse, k.reportedInUse) && k.inUseReported
	// A kubelet that never ran a volume has nothing to report: no write.
	same = same || (len(inUse) == 0 && !k.hadVolumes)
	k.mu.Unlock()
	if same {
		return
	}
	if k.patchVolumesInUse(ctx, inUse) != nil {
		return
	}
	k.mu.Lock()
	k.reportedInUse, k.inUseReported = inUse, true
	k.hadVolumes = k.hadVolumes || len(inUse) > 0
	k.mu.Unlock()
}

// patchVolumesInUse sets the node's status.volumesInUse to inUse.
func (k *Kubelet) patchVolumesInUse(ctx context.Context, inUse []corev1.UniqueVolumeName) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"volumesInUse": inUse}})
	if err != nil {
		return err
	}
	_, err = k.client.CoreV1().Nodes().Patch(ctx, k.node.Name(), types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

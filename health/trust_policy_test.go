package health_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
)

// inlineVolume returns a pod option that mounts src as volume "disk".
func inlineVolume(src corev1.VolumeSource) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "disk", VolumeSource: src})
	}
}

// singleWriterInlineVolumes are the inline volume types that one node at a
// time writes, by their field name in the pod spec.
var singleWriterInlineVolumes = []struct {
	kind string
	src  corev1.VolumeSource
}{
	{"iscsi", corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "10.0.0.1:3260", IQN: "iqn.2026-01.io.example:disk", Lun: 0}}},
	{"fc", corev1.VolumeSource{FC: &corev1.FCVolumeSource{TargetWWNs: []string{"500a0982991b8dc5"}}}},
	{"rbd", corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{CephMonitors: []string{"10.0.0.2:6789"}, RBDImage: "disk"}}},
	{"cinder", corev1.VolumeSource{Cinder: &corev1.CinderVolumeSource{VolumeID: "vol-1"}}},
	{"awsElasticBlockStore", corev1.VolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-0abc"}}},
	{"gcePersistentDisk", corev1.VolumeSource{GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{PDName: "disk"}}},
	{"azureDisk", corev1.VolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{DiskName: "disk", DataDiskURI: "https://example/disk.vhd"}}},
	{"vsphereVolume", corev1.VolumeSource{VsphereVolume: &corev1.VsphereVirtualDiskVolumeSource{VolumePath: "[ds] disk.vmdk"}}},
	{"portworxVolume", corev1.VolumeSource{PortworxVolume: &corev1.PortworxVolumeSource{VolumeID: "pxvol"}}},
	{"csi", corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "disk.csi.example.com"}}},
	{"flexVolume", corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{Driver: "example.com/disk"}}},
	{"photonPersistentDisk", corev1.VolumeSource{PhotonPersistentDisk: &corev1.PhotonPersistentDiskVolumeSource{PdID: "disk"}}},
	{"scaleIO", corev1.VolumeSource{ScaleIO: &corev1.ScaleIOVolumeSource{Gateway: "https://gw", System: "sys", VolumeName: "disk"}}},
	{"storageos", corev1.VolumeSource{StorageOS: &corev1.StorageOSVolumeSource{VolumeName: "disk"}}},
	{"flocker", corev1.VolumeSource{Flocker: &corev1.FlockerVolumeSource{DatasetName: "disk"}}},
}

// checkOnePod runs one check over a live pod on another node and pod, with
// node evidence holding node, and returns pod's report and the deletes sent.
func checkOnePod(t *testing.T, pod *corev1.Pod, node *corev1.Node, opts health.Options) (health.PodReport, []fake.DeleteCall) {
	t.Helper()
	pods := fake.New(fake.Options{}, newPod("alive", onNode("node-b")), pod)
	opts.Nodes = fake.NewNodes(node, newNode("node-b"))
	report, err := newChecker(t, pods, opts).CheckReport(context.Background())
	require.NoError(t, err)
	require.True(t, report.Healthy, "a held-back pod counts in neither column")
	return report.Pods[1], pods.Deletes()
}

// TestSingleWriterInlineVolumeNeedsFencing proves that an inline volume of a
// type that one node at a time writes makes a pod stateful: under
// FenceStateful it waits for fencing evidence, and says which volume; it
// goes under FenceNever, or once the node is out of service.
func TestSingleWriterInlineVolumeNeedsFencing(t *testing.T) {
	lost := newNode("node-lost", notReady, taint(corev1.TaintNodeUnreachable))
	fencedNode := newNode("node-lost", notReady, taint(corev1.TaintNodeUnreachable), outOfService)
	for _, v := range singleWriterInlineVolumes {
		t.Run(v.kind, func(t *testing.T) {
			pod := func() *corev1.Pod {
				return newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), inlineVolume(v.src))
			}

			got, deletes := checkOnePod(t, pod(), lost, health.Options{})
			require.Equal(t, health.HeldBack, got.Outcome, "FenceStateful without fencing evidence")
			require.Contains(t, got.HeldBack.String(), fmt.Sprintf("inline %s volume disk", v.kind))
			require.Empty(t, deletes)

			got, deletes = checkOnePod(t, pod(), lost, health.Options{Fencing: health.FenceNever})
			require.Equal(t, health.ForceDeleted, got.Outcome, "FenceNever; held back: %s", got.HeldBack)
			require.Len(t, deletes, 1)

			got, deletes = checkOnePod(t, pod(), fencedNode, health.Options{})
			require.Equal(t, health.ForceDeleted, got.Outcome, "node out of service; held back: %s", got.HeldBack)
			require.Len(t, deletes, 1)
		})
	}
}

// TestNodeLocalAndSharedInlineVolumesStayStateless proves that volumes no
// second node can write through (emptyDir, configMap, secret, projected,
// downwardAPI, hostPath, image, gitRepo: they live on the node) or that
// many nodes may write at once (nfs, cephfs, glusterfs, azureFile, quobyte)
// leave a ReplicaSet's pod stateless: it goes on taint-eviction evidence.
func TestNodeLocalAndSharedInlineVolumesStayStateless(t *testing.T) {
	lost := newNode("node-lost", notReady, taint(corev1.TaintNodeUnreachable))
	sources := map[string]corev1.VolumeSource{
		"emptyDir":    {EmptyDir: &corev1.EmptyDirVolumeSource{}},
		"configMap":   {ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
		"secret":      {Secret: &corev1.SecretVolumeSource{SecretName: "s"}},
		"projected":   {Projected: &corev1.ProjectedVolumeSource{}},
		"downwardAPI": {DownwardAPI: &corev1.DownwardAPIVolumeSource{}},
		"hostPath":    {HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}},
		"image":       {Image: &corev1.ImageVolumeSource{Reference: "example.com/data:1"}},
		"gitRepo":     {GitRepo: &corev1.GitRepoVolumeSource{Repository: "https://example.com/r.git"}},
		"nfs":         {NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/export"}},
		"cephfs":      {CephFS: &corev1.CephFSVolumeSource{Monitors: []string{"10.0.0.2:6789"}}},
		"glusterfs":   {Glusterfs: &corev1.GlusterfsVolumeSource{EndpointsName: "gluster", Path: "vol"}},
		"azureFile":   {AzureFile: &corev1.AzureFileVolumeSource{SecretName: "s", ShareName: "share"}},
		"quobyte":     {Quobyte: &corev1.QuobyteVolumeSource{Registry: "r:7861", Volume: "v"}},
	}
	opts := []podOption{onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), ownedByReplicaSet}
	for kind, src := range sources {
		t.Run(kind, func(t *testing.T) {
			got, deletes := checkOnePod(t, newPod("p", append(opts, inlineVolume(src))...), lost, health.Options{})
			require.Equal(t, health.ForceDeleted, got.Outcome, "held back: %s", got.HeldBack)
			require.Len(t, deletes, 1)
		})
	}
	t.Run("all of them at once", func(t *testing.T) {
		all := append([]podOption(nil), opts...)
		for _, src := range sources {
			all = append(all, inlineVolume(src))
		}
		got, deletes := checkOnePod(t, newPod("p", all...), lost, health.Options{})
		require.Equal(t, health.ForceDeleted, got.Outcome, "held back: %s", got.HeldBack)
		require.Len(t, deletes, 1)
	})
	t.Run("one single-writer volume among them", func(t *testing.T) {
		got, deletes := checkOnePod(t, newPod("p", append(opts, inlineVolume(sources["hostPath"]), inlineVolume(singleWriterInlineVolumes[0].src))...), lost, health.Options{})
		require.Equal(t, health.HeldBack, got.Outcome)
		require.Contains(t, got.HeldBack.String(), "inline iscsi volume")
		require.Empty(t, deletes)
	})
}

// TestMalformedPodIsHeldBack proves that a dead pod carrying two conditions
// of one type, which the API server never serves, is not force-deleted
// whatever the policy, the rule or the condition type, and that the reason
// names the condition.
func TestMalformedPodIsHeldBack(t *testing.T) {
	lost := newNode("node-lost", notReady, taint(corev1.TaintNodeUnreachable))
	fencedNode := newNode("node-lost", notReady, taint(corev1.TaintNodeUnreachable), outOfService)
	tests := []struct {
		name     string
		pod      *corev1.Pod
		node     *corev1.Node
		opts     health.Options
		wantType string
	}{
		{name: "DisruptionTarget twice, taint-evicted and terminated by the kubelet",
			pod:  newPod("p", onNode("node-lost"), deleting, phase(corev1.PodFailed), disruption("DeletionByTaintManager"), disruption("TerminationByKubelet")),
			node: lost, wantType: "DisruptionTarget"},
		{name: "DisruptionTarget twice, the same reason",
			pod:  newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), disruption("DeletionByTaintManager")),
			node: lost, wantType: "DisruptionTarget"},
		{name: "DisruptionTarget True and False",
			pod:  newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), condition(corev1.DisruptionTarget, corev1.ConditionFalse, "")),
			node: lost, wantType: "DisruptionTarget"},
		{name: "Ready twice",
			pod:  newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), condition(corev1.PodReady, corev1.ConditionFalse, ""), condition(corev1.PodReady, corev1.ConditionTrue, "")),
			node: lost, wantType: "Ready"},
		{name: "an unknown type twice",
			pod:  newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), condition("Weird", corev1.ConditionTrue, ""), condition("Weird", corev1.ConditionFalse, "")),
			node: lost, wantType: "Weird"},
		{name: "an empty type twice",
			pod:  newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), condition("", corev1.ConditionTrue, ""), condition("", corev1.ConditionTrue, "")),
			node: lost, wantType: `""`},
		{name: "fenced verdict: terminated by the kubelet, Ready twice",
			pod:  newPod("p", onNode("node-lost"), phase(corev1.PodFailed), disruption("TerminationByKubelet"), condition(corev1.PodReady, corev1.ConditionFalse, ""), condition(corev1.PodReady, corev1.ConditionFalse, "")),
			node: lost, wantType: "Ready"},
		{name: "FenceNever",
			pod:  newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), disruption("DeletionByTaintManager")),
			node: lost, opts: health.Options{Fencing: health.FenceNever}, wantType: "DisruptionTarget"},
		{name: "node out of service",
			pod:  newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"), disruption("DeletionByTaintManager")),
			node: fencedNode, wantType: "DisruptionTarget"},
		{name: "three of one type among many",
			pod: newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"),
				condition(corev1.PodScheduled, corev1.ConditionTrue, ""), condition(corev1.PodInitialized, corev1.ConditionTrue, ""),
				condition(corev1.ContainersReady, corev1.ConditionFalse, ""), condition(corev1.PodReady, corev1.ConditionFalse, ""),
				condition(corev1.PodReadyToStartContainers, corev1.ConditionFalse, ""), condition(corev1.PodScheduled, corev1.ConditionTrue, ""),
				condition(corev1.PodScheduled, corev1.ConditionTrue, "")),
			node: lost, wantType: "PodScheduled"},
	}
	many := []podOption{onNode("node-lost"), deleting, disruption("DeletionByTaintManager")}
	for i := range 20 {
		many = append(many, condition(corev1.PodConditionType(fmt.Sprintf("Type%02d", i)), corev1.ConditionTrue, ""))
	}
	tests = append(tests, struct {
		name     string
		pod      *corev1.Pod
		node     *corev1.Node
		opts     health.Options
		wantType string
	}{name: "a repeat after twenty distinct types", pod: newPod("p", append(many, condition("Type07", corev1.ConditionFalse, ""))...), node: lost, wantType: "Type07"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, deletes := checkOnePod(t, tt.pod, tt.node, tt.opts)
			require.Equal(t, health.Dead, got.Verdict.State, "the verdict stands: %+v", got.Verdict)
			require.Equal(t, health.HeldBack, got.Outcome)
			require.Contains(t, got.HeldBack.String(), "malformed")
			require.Contains(t, got.HeldBack.String(), tt.wantType)
			require.Contains(t, got.HeldBack.String(), "more than once")
			require.Empty(t, deletes)
		})
	}
}

// TestWellFormedPodWithEveryConditionTypeGoes proves that the malformed
// check looks for repeated types only: one condition of each kubelet type,
// and then twenty more distinct types, do not hold a dead pod back.
func TestWellFormedPodWithEveryConditionTypeGoes(t *testing.T) {
	lost := newNode("node-lost", notReady, taint(corev1.TaintNodeUnreachable))
	pod := newPod("p", onNode("node-lost"), deleting, disruption("DeletionByTaintManager"),
		condition(corev1.PodScheduled, corev1.ConditionTrue, ""), condition(corev1.PodInitialized, corev1.ConditionTrue, ""),
		condition(corev1.ContainersReady, corev1.ConditionFalse, ""), condition(corev1.PodReady, corev1.ConditionFalse, ""),
		condition(corev1.PodReadyToStartContainers, corev1.ConditionFalse, ""))
	got, deletes := checkOnePod(t, pod, lost, health.Options{})
	require.Equal(t, health.ForceDeleted, got.Outcome, "held back: %s", got.HeldBack)
	require.Len(t, deletes, 1)

	for i := range 20 {
		condition(corev1.PodConditionType(fmt.Sprintf("Type%02d", i)), corev1.ConditionTrue, "")(pod)
	}
	got, deletes = checkOnePod(t, pod, lost, health.Options{})
	require.Equal(t, health.ForceDeleted, got.Outcome, "twenty-six distinct types; held back: %s", got.HeldBack)
	require.Len(t, deletes, 1)
}

// controlledBy makes kind name of apiVersion the pod's controller.
func controlledBy(apiVersion, kind, name string) podOption {
	return func(p *corev1.Pod) {
		controller := true
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(name + "-uid"), Controller: &controller})
	}
}

// Under FenceStateful, a pod nobody vouches for (its controller is not a
// ReplicaSet, a Job or a DaemonSet of Kubernetes' own groups, or it has
// none) needs fencing as soon as it mounts storage that outlives its node,
// whatever the access mode; the writers annotation wins over the guess,
// and Options.Fencing over the annotation.
func TestTheDefaultPolicyHoldsStoragePodsNobodyVouchesFor(t *testing.T) {
	lost := newNode("node-lost", notReady, taint(corev1.TaintNodeUnreachable))
	rwx := health.Options{Claims: fake.NewClaims(sharedClaim("data"))}
	nfs := inlineVolume(corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/export"}})
	cephfs := inlineVolume(corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{Monitors: []string{"10.0.0.2:6789"}}})
	scratch := inlineVolume(corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})
	cluster := controlledBy("postgresql.cnpg.io/v1", "Cluster", "pg")
	for _, tt := range []struct {
		name string
		pod  []podOption
		opts health.Options
		held string // the hold's detail; "" when the pod goes
	}{
		{"a database's instance on a ReadWriteMany claim", []podOption{cluster, mountsClaim("data")}, rwx, "controlled by Cluster pg, not a ReplicaSet, Job or DaemonSet, and mounts claim data"},
		{"a database's instance on nfs", []podOption{cluster, nfs}, health.Options{}, "controlled by Cluster pg, not a ReplicaSet, Job or DaemonSet, and mounts shared nfs volume disk"},
		{"a bare pod on cephfs", []podOption{cephfs}, health.Options{}, "controlled by no ReplicaSet, Job or DaemonSet and mounts shared cephfs volume disk"},
		{"a custom resource named ReplicaSet", []podOption{controlledBy("db.example.com/v1", "ReplicaSet", "rs"), mountsClaim("data")}, rwx, "controlled by ReplicaSet rs, not a ReplicaSet, Job or DaemonSet, and mounts claim data"},
		{"a ReplicaSet that is an owner but not the controller", []podOption{func(p *corev1.Pod) {
			p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid"})
		}, mountsClaim("data")}, rwx, "controlled by no ReplicaSet, Job or DaemonSet and mounts claim data"},
		{"a database's instance on node-local volumes only", []podOption{cluster, scratch}, health.Options{}, ""},
		{"a ReplicaSet's pod on nfs", []podOption{ownedByReplicaSet, nfs}, health.Options{}, ""},
		{"a ReplicaSet's pod on a ReadWriteMany claim", []podOption{ownedByReplicaSet, mountsClaim("data")}, rwx, ""},
		{"a Job's pod on a ReadWriteMany claim", []podOption{controlledBy("batch/v1", "Job", "j"), mountsClaim("data")}, rwx, ""},
		{"a DaemonSet's pod on nfs", []podOption{controlledBy("apps/v1", "DaemonSet", "ds"), nfs}, health.Options{}, ""},
		{"writers=many on a database's instance", []podOption{cluster, mountsClaim("data"), annotated(health.AnnotationWriters, "many")}, rwx, ""},
		{"writers=many on a StatefulSet pod", []podOption{ownedByStatefulSet, annotated(health.AnnotationWriters, "many")}, health.Options{}, ""},
		{"writers=single on a ReplicaSet's pod without volumes", []podOption{ownedByReplicaSet, annotated(health.AnnotationWriters, "single")}, health.Options{}, health.AnnotationWriters + "=single"},
		{"writers of another value", []podOption{ownedByReplicaSet, annotated(health.AnnotationWriters, "Many")}, health.Options{}, `annotation podhealth.io/writers="Many" is neither single nor many`},
		{"FenceAlways over writers=many", []podOption{ownedByReplicaSet, annotated(health.AnnotationWriters, "many")}, health.Options{Fencing: health.FenceAlways}, "the policy requires fencing for every pod"},
		{"FenceNever over writers=single", []podOption{ownedByReplicaSet, annotated(health.AnnotationWriters, "single")}, health.Options{Fencing: health.FenceNever}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod("p", append([]podOption{onNode("node-lost"), deleting, disruption("DeletionByTaintManager")}, tt.pod...)...)
			got, deletes := checkOnePod(t, pod, lost, tt.opts)
			if tt.held == "" {
				require.Equal(t, health.ForceDeleted, got.Outcome, "held back: %s", got.HeldBack)
				require.Len(t, deletes, 1)
				return
			}
			require.Equal(t, health.HeldBack, got.Outcome)
			require.Equal(t, health.HeldForFencing, got.HeldBack.Reason)
			require.Equal(t, tt.held, got.HeldBack.Detail)
			require.Empty(t, deletes)
		})
	}
}

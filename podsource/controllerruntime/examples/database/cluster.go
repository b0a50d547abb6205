package database

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the Cluster's API group and version.
var GroupVersion = schema.GroupVersion{Group: "database.example.com", Version: "v1"}

// AddToScheme adds the Cluster's types to s.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Cluster{}, &ClusterList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// RoleLabel is the label of each instance pod that says its role: the
// operator sets RolePrimary on the instance it promotes, once that
// instance holds the primary Lease, and RoleReplica on the others, which
// stream the primary's changes into volumes of their own.
const (
	RoleLabel   = "database.example.com/role"
	RolePrimary = "primary"
	RoleReplica = "replica"
)

// Cluster is a database cluster: its instance pods, which it controls.
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ClusterSpec `json:"spec,omitempty"`
}

// ClusterSpec is a Cluster's desired state.
type ClusterSpec struct {
	// StopDeadline is how long after losing the primary Lease an instance
	// has stopped writing, at most (its stop included).
	StopDeadline metav1.Duration `json:"stopDeadline"` // podhealth: the deadline the protocol states
}

// ClusterList is a list of Clusters.
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cluster `json:"items"`
}

// DeepCopyObject returns a deep copy of c.
func (c *Cluster) DeepCopyObject() runtime.Object {
	out := *c
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// DeepCopyObject returns a deep copy of l.
func (l *ClusterList) DeepCopyObject() runtime.Object {
	out := *l
	out.Items = make([]Cluster, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*Cluster)
	}
	return &out
}

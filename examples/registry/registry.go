// Package registry shows podhealth in the shape of a catalog registry
// reconciler: for each catalog source, one "registry" pod, created with
// generateName, labelled with the catalog source's name and annotated with
// a hash of its pod spec. CheckRegistryServer answers whether a current
// registry pod is alive, force-deleting the pods that died with their node;
// EnsureRegistryServer creates a new pod when it answers (false, nil).
//
// The Reconciler is cheap and built per call, as such operators do, by a
// Factory that the operator builds once at setup (OLM's
// RegistryReconcilerFactory). What must outlive a call, the Factory holds
// and hands to every Reconciler: what the checks share (the record of
// what was force-deleted, a health.Memory, and the node evidence), a
// *kube.Checkers; and the record of the registry pods created that the
// informer does not list yet, a replacements.Tracker.
//
// Every line that podhealth adds to this code or changes in it is marked,
// between "podhealth:begin" and "podhealth:end" comments or by a
// "podhealth:" comment at its end; TestOLMsShapeIsAtMost25Lines counts
// them by the rule of docs/operators.md ("Counting the glue").
package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/dump"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	// podhealth:begin imports
	"github.com/podhealth/podhealth/podsource/kube"
	"github.com/podhealth/podhealth/replacements"
	// podhealth:end
)

const (
	// CatalogSourceLabel ties a registry pod to its catalog source: the
	// pods of catalog source c are labelled CatalogSourceLabel=c.
	CatalogSourceLabel = "olm.catalogSource"
	// SpecHashAnnotation holds the hash of the pod spec a registry pod was
	// created from (CatalogSource.SpecHash).
	SpecHashAnnotation = "olm.pod-spec-hash"
	// ContainerName is the name of the registry pod's one container.
	ContainerName = "registry"
	// GRPCPort is the port the registry serves on.
	GRPCPort = 50051
)

// CatalogSource is what a registry pod is built from.
type CatalogSource struct {
	Name      string
	Namespace string
	// Image is the registry image.
	Image string
}

// Validate returns an error when s cannot describe a registry pod.
func (s CatalogSource) Validate() error {
	var problems []string
	if msgs := validation.IsDNS1123Label(s.Namespace); len(msgs) > 0 {
		problems = append(problems, fmt.Sprintf("namespace %q: %s", s.Namespace, strings.Join(msgs, "; ")))
	}
	if s.Name == "" {
		problems = append(problems, "empty name")
	} else {
		// The name is a label value and the prefix of generateName.
		msgs := append(validation.IsValidLabelValue(s.Name), validation.IsDNS1123Subdomain(s.Name+"-x")...)
		if len(msgs) > 0 {
			problems = append(problems, fmt.Sprintf("name %q: %s", s.Name, strings.Join(msgs, "; ")))
		}
	}
	if s.Image == "" {
		problems = append(problems, "empty image")
	}
	if len(problems) > 0 {
		return fmt.Errorf("registry: invalid catalog source %s/%s: %s", s.Namespace, s.Name, strings.Join(problems, ", "))
	}
	return nil
}

// Selector returns the selector of the catalog source's pods, current or
// stale: CatalogSourceLabel=<name>.
func (s CatalogSource) Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{CatalogSourceLabel: s.Name})
}

// SpecHash returns the hash of the pod spec that s gives its registry pod.
// It changes whenever the spec does: a new image, or a new pod template in
// a new version of the operator.
func (s CatalogSource) SpecHash() string {
	sum := sha256.Sum256([]byte(dump.ForHash(s.podSpec())))
	return hex.EncodeToString(sum[:8])
}

// podSpec is the spec of the catalog source's registry pod.
func (s CatalogSource) podSpec() corev1.PodSpec {
	return corev1.PodSpec{
		Containers: []corev1.Container{{
			Name:  ContainerName,
			Image: s.Image,
			Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: GRPCPort, Protocol: corev1.ProtocolTCP}},
		}},
	}
}

// Pod returns the registry pod to create for s: no name, generateName
// "<name>-", the catalog source label and the spec hash annotation.
func (s CatalogSource) Pod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: s.Name + "-",
			Namespace:    s.Namespace,
			Labels:       map[string]string{CatalogSourceLabel: s.Name},
			Annotations:  map[string]string{SpecHashAnnotation: s.SpecHash()},
		},
		Spec: s.podSpec(),
	}
}

// Current reports whether pod was created from s's current spec: its spec
// hash annotation is s's, and its registry container runs s's image. A
// stale pod, left from an older spec, is not current.
func (s CatalogSource) Current(pod *corev1.Pod) bool {
	if pod.Annotations[SpecHashAnnotation] != s.SpecHash() {
		return false
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == ContainerName {
			return c.Image == s.Image
		}
	}
	return false
}

// Factory builds a Reconciler per call, as OLM's RegistryReconcilerFactory
// does: the operator builds one Factory at setup, and it holds what must
// outlive a call.
type Factory struct {
	client kubernetes.Interface
	pods   corelisters.PodLister
	log    logr.Logger
	// podhealth:begin factory-fields
	created  *replacements.Tracker
	checkers *kube.Checkers
	// podhealth:end
}

// NewFactory returns the Factory of the operator's Reconcilers, which
// list pods from pods (an informer's lister), and delete and create them
// through client. Call it once, at setup: every Reconciler it builds
// shares its record of the registry pods created that the informer does
// not list yet (a replacements.Tracker), and what their checks share (a
// kube.Checkers over client: the record of what was force-deleted, a
// health.Memory, and the node evidence, which reads the node of a pod that
// is terminating live, one GET per node and check, and so lets a lost
// node's pod go at once).
func NewFactory(client kubernetes.Interface, pods corelisters.PodLister, log logr.Logger) (*Factory, error) {
	if client == nil {
		return nil, errors.New("registry: NewFactory: nil clientset")
	}
	if pods == nil {
		return nil, errors.New("registry: NewFactory: nil PodLister")
	}
	// podhealth:begin checkers
	checkers, err := kube.NewCheckers(client, kube.CheckersOptions{})
	if err != nil {
		return nil, fmt.Errorf("registry: NewFactory: %w", err)
	}
	// podhealth:end
	return &Factory{client: client, pods: pods, log: log, created: replacements.New(replacements.Options{}), checkers: checkers}, nil // podhealth: created, checkers
}

// Reconciler returns a Reconciler for one call.
func (f *Factory) Reconciler() *Reconciler {
	return &Reconciler{client: f.client, pods: f.pods, log: f.log, created: f.created, checkers: f.checkers} // podhealth: created, checkers
}

// Reconciler checks and creates the registry pods of catalog sources. It
// is built per call, by a Factory; it holds nothing that must survive one.
type Reconciler struct {
	client kubernetes.Interface
	pods   corelisters.PodLister
	log    logr.Logger
	// podhealth:begin fields
	created  *replacements.Tracker // the Factory's
	checkers *kube.Checkers        // the Factory's
	// podhealth:end
}

// readme:begin registry
// CheckRegistryServer reports whether a registry pod of source's current
// spec is alive. On the way it force-deletes the current pods that died
// with their node (grace period 0, UID precondition).
//
// (true, nil): a current pod is alive. (false, nil): none is, and the
// caller should create one. (false, err): the check failed (an invalid
// source, a failed list or a failed force delete); create nothing, retry.
func (r *Reconciler) CheckRegistryServer(ctx context.Context, source CatalogSource) (bool, error) {
	if err := source.Validate(); err != nil {
		return false, err
	}
	// podhealth:begin check
	// Only the pods of the current spec count (Keep): a stale pod, however
	// alive, must not answer healthy for a spec it does not run, and is
	// never judged, so never force-deleted here either. The checks of
	// every call share the Factory's Checkers, so that the next call,
	// listing a force-deleted pod again from a cache that has not yet seen
	// the delete, sends no other DELETE.
	report, err := r.checkers.Check(ctx, r.pods, source.Namespace, source.Selector(), kube.CheckOptions{Keep: source.Current})
	return report.Healthy, err
	// podhealth:end
}

// readme:end registry

// EnsureRegistryServer makes sure source has a current registry pod: it
// creates one, with generateName, when CheckRegistryServer answers
// (false, nil), and creates nothing when it fails.
//
// It creates nothing either while a pod that an earlier call created for
// the same spec is not yet in the informer's cache: the Tracker remembers
// it until the cache lists it, or for replacements.DefaultTTL. So a call
// that runs before the informer shows the new pod does not create a second
// one.
func (r *Reconciler) EnsureRegistryServer(ctx context.Context, source CatalogSource) error {
	if err := source.Validate(); err != nil {
		return err
	}
	report, err := r.checkers.Check(ctx, r.pods, source.Namespace, source.Selector(), kube.CheckOptions{Keep: source.Current}) // podhealth: CheckRegistryServer's check, with its report
	// The pods created are tracked per spec: a pod created for an older
	// spec is not current, so no list of the current pods would contain it.
	workload := source.Namespace + "/" + source.Name + "/" + source.SpecHash() // podhealth:
	pending := r.created.PendingReport(workload, report)                       // podhealth: after every check
	switch {
	case err != nil:
		return err
	case report.Healthy: // podhealth: the report's
		return nil
	// podhealth:begin pending
	case pending > 0:
		r.log.Info("registry pod created earlier is not in the cache yet; creating no other", "catalogSource", source.Namespace+"/"+source.Name, "pending", pending)
		return nil
		// podhealth:end
	}
	created, err := r.client.CoreV1().Pods(source.Namespace).Create(ctx, source.Pod(), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("registry: creating the registry pod of catalog source %s/%s: %w", source.Namespace, source.Name, err)
	}
	r.created.Created(workload, created) // podhealth:
	r.log.Info("created registry pod", "catalogSource", source.Namespace+"/"+source.Name, "pod", created.Name, "specHash", source.SpecHash())
	return nil
}

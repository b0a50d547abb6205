package plugin

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
)

// Cluster is what the command reads and writes: core/v1 pods, nodes,
// claims and namespaces, and nothing else. Errors are the API server's
// (apierrors.IsNotFound and the like reach them) or the transport's.
//
// The command talks to the API server through a REST client of core/v1
// alone rather than client-go's clientset, which would build every API
// group into the binary: the plugin ships for six platforms.
type Cluster interface {
	// ListPods is one LIST of pods, in every namespace when namespace is "".
	ListPods(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.PodList, error)
	// GetPod is one GET of a pod.
	GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// DeletePod is one DELETE of a pod with opts as its body.
	DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
	// ListNodes is one LIST of nodes.
	ListNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	// GetNode is one GET of a node.
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
	// GetClaim is one GET of a PersistentVolumeClaim.
	GetClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	// GetNamespace is one GET of a namespace.
	GetNamespace(ctx context.Context, name string) (*corev1.Namespace, error)
}

var _ Cluster = (*restCluster)(nil)

// restCluster is the Cluster of a real API server. It is safe for
// concurrent use.
type restCluster struct {
	client rest.Interface
	params runtime.ParameterCodec
}

// NewCluster returns the Cluster of the API server that config names,
// speaking JSON to its core/v1 API, with config's user agent or client-go's
// default one.
func NewCluster(config *rest.Config) (Cluster, error) {
	if config == nil {
		return nil, errors.New("plugin: NewCluster: nil rest.Config")
	}
	scheme := runtime.NewScheme()
	// core/v1's types, with metav1's options registered in its version.
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(config)
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.APIPath = "/api"
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &restCluster{client: client, params: runtime.NewParameterCodec(scheme)}, nil
}

func (c *restCluster) ListPods(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.PodList, error) {
	list := &corev1.PodList{}
	err := c.client.Get().Namespace(namespace).Resource("pods").VersionedParams(&opts, c.params).Do(ctx).Into(list)
	return list, err
}

func (c *restCluster) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := c.client.Get().Namespace(namespace).Resource("pods").Name(name).Do(ctx).Into(pod)
	return pod, err
}

func (c *restCluster) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.client.Delete().Namespace(namespace).Resource("pods").Name(name).Body(&opts).Do(ctx).Error()
}

func (c *restCluster) ListNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	list := &corev1.NodeList{}
	err := c.client.Get().Resource("nodes").VersionedParams(&opts, c.params).Do(ctx).Into(list)
	return list, err
}

func (c *restCluster) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	node := &corev1.Node{}
	err := c.client.Get().Resource("nodes").Name(name).Do(ctx).Into(node)
	return node, err
}

func (c *restCluster) GetClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	claim := &corev1.PersistentVolumeClaim{}
	err := c.client.Get().Namespace(namespace).Resource("persistentvolumeclaims").Name(name).Do(ctx).Into(claim)
	return claim, err
}

func (c *restCluster) GetNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	err := c.client.Get().Resource("namespaces").Name(name).Do(ctx).Into(ns)
	return ns, err
}

var _ health.NodeGetter = liveNodes{}

// liveNodes reads nodes straight from the API server: the checker's second
// look at a node missing from the node list. An answer that says no node
// can be read now (podsource.NoNodeReadable) wraps
// health.ErrNodesUnavailable as well as the API error, so that a check asks
// about no other node, as kube.LiveNodes does.
type liveNodes struct{ cluster Cluster }

func (l liveNodes) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	node, err := l.cluster.GetNode(ctx, name)
	switch {
	case podsource.NoNodeReadable(err):
		return nil, fmt.Errorf("getting node %q: %w: %w", name, health.ErrNodesUnavailable, err)
	case err != nil:
		return nil, err
	}
	return node, nil
}

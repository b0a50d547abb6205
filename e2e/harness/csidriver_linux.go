package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// NodeCSIDriver is CSIDriverName's node plugin on one real node, served
// by the test process: the kubelet finds it through its plugin
// registration (no node-driver-registrar), and NodePublishVolume
// bind-mounts the volume's directory (VolumesDir/HANDLE, on the host)
// onto the pod's target path inside the node's mount namespace, where
// containerd and runc mount it into the container. Attaching is the
// attach-detach controller's and [Attacher]'s: the kubelet starts a pod
// with a CSI volume only once its VolumeAttachment says attached. Safe
// for concurrent use.
type NodeCSIDriver struct {
	node       *RealNode
	volumesDir string
	servers    []*grpc.Server

	mu         sync.Mutex
	registered error // the kubelet's answer; nil once it accepted
	answered   bool
	published  map[string]string // target path → volume handle
}

// StartCSIDriver serves the node plugin of CSIDriverName for n, with
// every volume a directory of volumesDir named by its handle, and
// registers it with n's kubelet. It stops when n is torn down.
func (n *RealNode) StartCSIDriver(volumesDir string) (*NodeCSIDriver, error) {
	d := &NodeCSIDriver{node: n, volumesDir: volumesDir, published: map[string]string{}}
	kubeletDir := filepath.Join(n.dir, "kubelet")
	pluginSock := filepath.Join(kubeletDir, "plugins", CSIDriverName, "csi.sock")
	regSock := filepath.Join(kubeletDir, "plugins_registry", CSIDriverName+"-reg.sock")
	for _, s := range []string{pluginSock, regSock} {
		if err := os.MkdirAll(filepath.Dir(s), 0o755); err != nil {
			return nil, err
		}
	}
	plugin := grpc.NewServer()
	csi.RegisterIdentityServer(plugin, csiIdentity{})
	csi.RegisterNodeServer(plugin, &csiNode{d: d})
	reg := grpc.NewServer()
	registerapi.RegisterRegistrationServer(reg, &csiRegistration{d: d, endpoint: pluginSock})
	// The plugin's socket first: the kubelet calls it as soon as it has
	// registered the driver.
	for _, s := range []struct {
		srv  *grpc.Server
		path string
	}{{plugin, pluginSock}, {reg, regSock}} {
		_ = os.Remove(s.path)
		ln, err := net.Listen("unix", s.path)
		if err != nil {
			d.stop()
			return nil, fmt.Errorf("harness: CSI driver of %s: %w", n.name, err)
		}
		d.servers = append(d.servers, s.srv)
		go func() { _ = s.srv.Serve(ln) }()
	}
	n.mu.Lock()
	n.csi = d
	n.mu.Unlock()
	return d, nil
}

// Registered says whether the kubelet has accepted the driver, and its
// error if it refused it.
func (d *NodeCSIDriver) Registered() (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.answered && d.registered == nil, d.registered
}

func (d *NodeCSIDriver) stop() {
	for _, s := range d.servers {
		s.Stop()
	}
}

type csiIdentity struct {
	csi.UnimplementedIdentityServer
}

func (csiIdentity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: CSIDriverName, VendorVersion: "v1"}, nil
}

func (csiIdentity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{Type: &csi.PluginCapability_Service_{
		Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}}}}, nil
}

func (csiIdentity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

type csiRegistration struct {
	registerapi.UnimplementedRegistrationServer
	d        *NodeCSIDriver
	endpoint string
}

func (r *csiRegistration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: CSIDriverName, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *csiRegistration) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	r.d.answered = true
	r.d.registered = nil
	if !s.PluginRegistered {
		r.d.registered = errors.New(s.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// csiNode publishes by bind mounts; it has no staging, so the kubelet
// calls NodePublishVolume directly.
type csiNode struct {
	csi.UnimplementedNodeServer
	d *NodeCSIDriver
}

func (s *csiNode) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: s.d.node.name}, nil
}

func (s *csiNode) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

func (s *csiNode) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	handle, target := req.GetVolumeId(), req.GetTargetPath()
	if handle == "" || target == "" || filepath.Base(handle) != handle {
		return nil, status.Errorf(codes.InvalidArgument, "volume %q, target %q", handle, target)
	}
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if s.d.published[target] == handle {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	source := filepath.Join(s.d.volumesDir, handle)
	if err := os.MkdirAll(source, 0o755); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := s.d.node.inMountNamespace(ctx, "mkdir", "-p", target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := s.d.node.inMountNamespace(ctx, "mount", "--bind", source, target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	s.d.published[target] = handle
	return &csi.NodePublishVolumeResponse{}, nil
}

func (s *csiNode) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if _, ok := s.d.published[target]; ok {
		if err := s.d.node.inMountNamespace(ctx, "umount", target); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		delete(s.d.published, target)
	}
	_ = s.d.node.inMountNamespace(ctx, "rmdir", target)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// inMountNamespace runs a command in the node's mount namespace.
func (n *RealNode) inMountNamespace(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "nsenter", append([]string{"--target", strconv.Itoa(n.holder.Process.Pid), "--mount", "--"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %w: %s", args, err, out)
	}
	return nil
}

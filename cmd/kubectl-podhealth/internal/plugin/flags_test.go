package plugin

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// TestTheClusterFlagsKeepKubectlsNames: every flag with which kubectl
// reaches a cluster is the plugin's too, by the same name and shorthand,
// except --cache-dir (the plugin keeps no discovery cache).
func TestTheClusterFlagsKeepKubectlsNames(t *testing.T) {
	o := &options{}
	flags := o.command(context.Background()).Flags()
	for name, shorthand := range map[string]string{
		"kubeconfig": "", "context": "", "cluster": "", "user": "", "namespace": "n", "server": "s",
		"token": "", "as": "", "as-group": "", "as-uid": "", "as-user-extra": "", "username": "", "password": "",
		"certificate-authority": "", "client-certificate": "", "client-key": "", "insecure-skip-tls-verify": "",
		"tls-server-name": "", "proxy-url": "", "disable-compression": "", "request-timeout": "",
	} {
		f := flags.Lookup(name)
		require.NotNil(t, f, "--%s", name)
		require.Equal(t, shorthand, f.Shorthand, "--%s", name)
	}
	require.Nil(t, flags.Lookup("cache-dir"))
}

// TestTheClusterFlagsReachTheRESTConfig: the flags' values end up in the
// REST config the Cluster is built from, over the kubeconfig's.
func TestTheClusterFlagsReachTheRESTConfig(t *testing.T) {
	var got *rest.Config
	f := loadFixtures(t)
	client := newClient(t, f.nodeHealthy, namespace("other"))
	kubeconfig := writeKubeconfig(t)
	var stdout, stderr strings.Builder
	env := Env{NewCluster: func(c *rest.Config) (Cluster, error) { got = c; return clientsetCluster{client}, nil }}
	code := Main(context.Background(), []string{"--kubeconfig=" + kubeconfig,
		"-s", "https://127.0.0.1:6443", "--token=t0ken", "--as=jane", "--as-group=ops", "--as-group=dev", "--as-uid=u-1",
		"--as-user-extra=scopes=view", "--as-user-extra=scopes=edit", "--tls-server-name=api.internal",
		"--insecure-skip-tls-verify", "--request-timeout=7s", "-n", "other"}, IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr}, env)
	require.Equal(t, ExitNothingToDo, code, "stderr: %s", stderr.String())
	require.NotNil(t, got)
	require.Equal(t, "https://127.0.0.1:6443", got.Host)
	require.Equal(t, "t0ken", got.BearerToken)
	require.Equal(t, rest.ImpersonationConfig{UserName: "jane", UID: "u-1", Groups: []string{"ops", "dev"},
		Extra: map[string][]string{"scopes": {"view", "edit"}}}, got.Impersonate)
	require.Equal(t, "api.internal", got.TLSClientConfig.ServerName)
	require.True(t, got.TLSClientConfig.Insecure)
	require.Equal(t, "7s", got.Timeout.String())
	require.Contains(t, stderr.String(), "in namespace other", "-n picks the namespace")
}

// -v is kubectl's verbosity, as in kubectl: `kubectl podhealth -v=6` lists
// and logs its requests; it is not taken for --version, which has no
// shorthand.
func TestDashVIsKubectlsVerbosityNotVersion(t *testing.T) {
	o := &options{}
	flags := o.command(context.Background()).Flags()
	v := flags.ShorthandLookup("v")
	require.NotNil(t, v)
	require.Equal(t, "v", v.Name)
	require.NoError(t, flags.Parse([]string{"-v=6"}))
	require.Equal(t, 6, o.verbosity)
	require.Error(t, setVerbosity(-1))
	require.NoError(t, setVerbosity(0))
}

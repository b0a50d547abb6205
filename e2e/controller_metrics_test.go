package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podhealth/podhealth/e2e/harness"
)

// checkSecureMetrics runs one more replica as the manifests run it, with
// /metrics over HTTPS behind the API server's authentication and
// authorization (--metrics-secure, the default), and reads its metrics
// as four clients would: without a token (401), with a token the API
// server rejects (401), with the token of an account that may not get
// /metrics (403), and with the token that the monitoring component's
// ServiceMonitor names: its Secret, filled by kube-controller-manager's
// token controller, of the ServiceAccount it binds to the manifests'
// podhealth-controller-metrics-reader ClusterRole (200, the podhealth
// metrics).
func checkSecureMetrics(ctx context.Context, t *testing.T, cp *harness.ControlPlane, kubeconfig string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cp.StartController(t, bins, "secure", "--kubeconfig="+kubeconfig, "--leader-elect=true", "--leader-election-namespace="+controllerNamespace,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port), "--health-probe-bind-address=127.0.0.1:0", "--metrics-secure=true")
	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", port)

	c := cp.Client()
	token := func(account string) string {
		t.Helper()
		if _, err := c.CoreV1().ServiceAccounts(controllerNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: account}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := c.CoreV1().ServiceAccounts(controllerNamespace).CreateToken(ctx, account,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	// The replica's certificate is its own self-signed one.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(bearer string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	scraper, stranger := monitoringComponentToken(ctx, t, cp), token("stranger")
	var code int
	var body string
	if err := pollUntil(ctx, func() bool { code, body = get(scraper); return code == http.StatusOK }); err != nil {
		t.Fatalf("the metrics reader's scrape of the secure endpoint: %d %s: %v", code, body, err)
	}
	if !strings.Contains(body, "podhealth_memory_shed_total") {
		t.Errorf("the secure endpoint serves no podhealth metrics:\n%s", body)
	}
	// PodhealthNoLeader reads controller-runtime's leader gauge, which a
	// replica reports from its start, standby or not.
	if !strings.Contains(body, `leader_election_master_status{name="`+controllerAccount+`"}`) {
		t.Errorf("the secure endpoint serves no leader_election_master_status for the Lease %s:\n%s", controllerAccount, body)
	}
	if code, body := get(""); code != http.StatusUnauthorized {
		t.Errorf("a scrape without a token: %d %s, want 401", code, body)
	}
	if code, body := get("not-a-token-the-api-server-issued"); code != http.StatusUnauthorized {
		t.Errorf("a scrape with a token the API server rejects: %d %s, want 401 (Prometheus reads a 500 as a fault of the server)", code, body)
	}
	if code, body := get(stranger); code != http.StatusForbidden {
		t.Errorf("a scrape by an account without podhealth-controller-metrics-reader: %d %s, want 403", code, body)
	}
}

// monitoringComponentToken applies the monitoring component's scraper
// (config/monitoring/metrics_scraper.yaml: a ServiceAccount, its token
// Secret and its binding to podhealth-controller-metrics-reader) and
// returns the token that kube-controller-manager writes into the Secret,
// as Prometheus Operator reads it for the ServiceMonitor.
func monitoringComponentToken(ctx context.Context, t *testing.T, cp *harness.ControlPlane) string {
	t.Helper()
	objs := fileObjects(t, filepath.Join(controllerConfigDir, "monitoring", "metrics_scraper.yaml"))
	applyObjects(ctx, t, cp, objs, false)
	var secretName string
	for _, o := range objs {
		if o.GetKind() == "Secret" {
			secretName = o.GetName()
		}
	}
	if secretName == "" {
		t.Fatal("metrics_scraper.yaml holds no Secret")
	}
	var token string
	if err := pollUntil(ctx, func() bool {
		s, err := cp.Client().CoreV1().Secrets(controllerNamespace).Get(ctx, secretName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		token = string(s.Data[corev1.ServiceAccountTokenKey])
		return token != ""
	}); err != nil {
		t.Fatalf("the token controller did not fill %s/%s: %v", controllerNamespace, secretName, err)
	}
	return token
}

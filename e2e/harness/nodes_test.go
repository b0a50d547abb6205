package harness

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A failed heartbeat is retried at once, then after 100 ms doubling, never
// longer than 7 s or the interval, and with a random part of at most half,
// so that nodes that failed together retry apart.
func TestAFailedHeartbeatIsRetriedWithABackoffBelowTheInterval(t *testing.T) {
	if got := retryAfter(1, time.Minute); got != 0 {
		t.Errorf("first retry after %v, want at once", got)
	}
	for _, tc := range []struct {
		failures    int
		interval    time.Duration
		least, most time.Duration
	}{
		{2, time.Minute, 50 * time.Millisecond, 100 * time.Millisecond},
		{3, time.Minute, 100 * time.Millisecond, 200 * time.Millisecond},
		{8, time.Minute, 3200 * time.Millisecond, 6400 * time.Millisecond},
		{10, time.Minute, 3500 * time.Millisecond, 7 * time.Second},
		{1000, time.Minute, 3500 * time.Millisecond, 7 * time.Second},
		{1000, time.Second, 500 * time.Millisecond, time.Second},
	} {
		seen := map[time.Duration]bool{}
		for range 200 {
			got := retryAfter(tc.failures, tc.interval)
			if got < tc.least || got > tc.most {
				t.Fatalf("retryAfter(%d, %v) = %v, want within [%v, %v]", tc.failures, tc.interval, got, tc.least, tc.most)
			}
			seen[got] = true
		}
		if len(seen) < 2 {
			t.Errorf("retryAfter(%d, %v) gave one value in 200 draws: no random part", tc.failures, tc.interval)
		}
	}
}

// A node whose heartbeat fails (the API server answers 500 three times)
// reports again within a second, not at its next tick an hour later; and
// no heartbeat is sent once Fail has returned.
func TestANodeRetriesAFailedHeartbeatBeforeItsNextTick(t *testing.T) {
	server := startHeartbeatServer(t, 3)
	n := &Node{cp: &ControlPlane{opts: Options{HeartbeatInterval: time.Hour}, heartbeats: server.client}, name: "n1"}
	n.mu.Lock()
	n.startLoopLocked(0)
	n.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for n.LastHeartbeat().IsZero() {
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat succeeded within 5 s of three failures (last error: %v)", n.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := n.Err(); err != nil {
		t.Errorf("Err after a heartbeat succeeded: %v", err)
	}
	if n.ReportedAt().Before(n.LastHeartbeat()) {
		t.Errorf("ReportedAt %v, before the heartbeat it answered was sent (%v)", n.ReportedAt(), n.LastHeartbeat())
	}
	n.Fail()
	after := server.count()
	if after != 5 { // three failed status PATCHes, one that succeeded, the Lease's
		t.Errorf("%d requests, want 5", after)
	}
	time.Sleep(300 * time.Millisecond)
	if got := server.count(); got != after {
		t.Errorf("%d requests after Fail returned", got-after)
	}
}

// A recovered node has not reported until the API server answers its first
// heartbeat since the recovery: ReportedAt is zero or later than the
// recovery, and stays put at the later heartbeats.
func TestARecoveredNodeReportsAtItsFirstAnsweredHeartbeat(t *testing.T) {
	server := startHeartbeatServer(t, 0)
	n := &Node{cp: &ControlPlane{opts: Options{HeartbeatInterval: 50 * time.Millisecond}, heartbeats: server.client}, name: "n1"}
	n.mu.Lock()
	n.startLoopLocked(0)
	n.mu.Unlock()
	defer n.Fail()
	first := waitReported(t, n)
	time.Sleep(200 * time.Millisecond) // about four more heartbeats
	n.Fail()
	if server.count() < 4 {
		t.Fatalf("%d requests: the node did not beat again after its report", server.count())
	}
	if got := n.ReportedAt(); !got.Equal(first) {
		t.Errorf("ReportedAt moved from %v to %v while the node beat", first, got)
	}
	recovered := time.Now()
	n.Recover()
	if got := n.ReportedAt(); !got.IsZero() && got.Before(recovered) {
		t.Errorf("ReportedAt just after Recover = %v, the report before the failure", got)
	}
	if again := waitReported(t, n); !again.After(recovered) {
		t.Errorf("ReportedAt after the recovery = %v, not after it (%v)", again, recovered)
	}
}

// waitReported waits up to 5 s for n's ReportedAt, and returns it.
func waitReported(t *testing.T, n *Node) time.Time {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for n.ReportedAt().IsZero() {
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat answered within 5 s (last error: %v)", n.Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return n.ReportedAt()
}

// heartbeatServer is a loopback API server for heartbeats: it answers a
// node's status PATCH and its Lease's, failing the first ones as asked.
type heartbeatServer struct {
	client *kubernetes.Clientset

	mu                     sync.Mutex
	requests, failuresLeft int
}

func (s *heartbeatServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// startHeartbeatServer starts a heartbeatServer that answers 500 to its
// first failures requests, and stops it when the test ends.
func startHeartbeatServer(t *testing.T, failures int) *heartbeatServer {
	t.Helper()
	s := &heartbeatServer{failuresLeft: failures}
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.requests++
		fail := s.failuresLeft > 0
		if fail {
			s.failuresLeft--
		}
		s.mu.Unlock()
		if fail {
			http.Error(w, "busy", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		kind, apiVersion := `"Node"`, `"v1"`
		if strings.Contains(r.URL.Path, "/leases/") {
			kind, apiVersion = `"Lease"`, `"coordination.k8s.io/v1"`
		}
		_, _ = io.WriteString(w, `{"kind":`+kind+`,"apiVersion":`+apiVersion+`,"metadata":{"name":"n1"}}`)
	}))
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server.Listener = listener
	server.Start()
	t.Cleanup(server.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: server.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	s.client = client
	return s
}

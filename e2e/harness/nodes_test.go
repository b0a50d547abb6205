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
	var mu sync.Mutex
	requests, failuresLeft := 0, 3
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		requests++
		fail := failuresLeft > 0
		if fail {
			failuresLeft--
		}
		mu.Unlock()
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
	defer server.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: server.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{cp: &ControlPlane{opts: Options{HeartbeatInterval: time.Hour}, heartbeats: client}, name: "n1"}
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
	n.Fail()
	mu.Lock()
	after := requests
	mu.Unlock()
	if after != 5 { // three failed status PATCHes, one that succeeded, the Lease's
		t.Errorf("%d requests, want 5", after)
	}
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if requests != after {
		t.Errorf("%d requests after Fail returned", requests-after)
	}
}

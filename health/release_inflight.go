package health

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// inflight deduplicates force deletes in progress: concurrent checks that
// meet the same dead pod send one DELETE, and the later ones wait for the
// first one's result. It is safe for concurrent use; its zero value is
// ready.
type inflight struct {
	mu    sync.Mutex
	calls map[types.UID]*deleteCall
}

// deleteCall is one force delete in progress; done closes when it ends, and
// res is set before that.
type deleteCall struct {
	done chan struct{}
	res  result
}

// claim returns the call in flight for uid (owner=false), or registers a
// new one (owner=true) that the caller must end with finish on every path,
// panics included.
func (f *inflight) claim(uid types.UID) (call *deleteCall, owner bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if call, ok := f.calls[uid]; ok {
		return call, false
	}
	if f.calls == nil {
		f.calls = make(map[types.UID]*deleteCall)
	}
	call = &deleteCall{done: make(chan struct{})}
	f.calls[uid] = call
	return call, true
}

// finish ends the call with res and wakes its waiters.
func (f *inflight) finish(uid types.UID, call *deleteCall, res result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	call.res = res
	delete(f.calls, uid)
	close(call.done)
}

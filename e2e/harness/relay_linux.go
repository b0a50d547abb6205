package harness

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// relay is a real node's only path to the API server: it listens on
// 127.0.0.1 inside the node's network namespace, on the API server's port,
// and passes every byte to the API server on the host's 127.0.0.1. Cutting
// it is the node's partition: bytes stop in both directions, connections
// stay open (as behind a link that went down: nothing is reset, and a
// side that gives up is not told until the link is back), and new ones are
// accepted but reach nothing. Healing lets the held bytes through.
// Safe for concurrent use.
type relay struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	up     *sync.Cond // broadcast when cut or closed changes
	cut    bool
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// listenInNetns listens on addr inside the network namespace at nsPath.
// The socket keeps its namespace after the thread that made it leaves.
func listenInNetns(nsPath, addr string) (net.Listener, error) {
	var ln net.Listener
	var lerr error
	if err := inNetns(nsPath, func() { ln, lerr = net.Listen("tcp", addr) }); err != nil {
		return nil, err
	}
	return ln, lerr
}

// inNetns runs fn on a thread of its own inside the network namespace at
// nsPath, and returns once fn has: the sockets fn makes keep that
// namespace.
func inNetns(nsPath string, fn func()) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer own.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering %s: %w", nsPath, err)
			return
		}
		fn()
		// A thread that cannot go back stays locked, and the runtime
		// retires it with this goroutine: no other goroutine runs in the
		// node's namespace.
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		done <- nil
	}()
	return <-done
}

// startRelay listens at addr in the namespace at nsPath and relays to
// target.
func startRelay(nsPath, addr, target string) (*relay, error) {
	ln, err := listenInNetns(nsPath, addr)
	if err != nil {
		return nil, fmt.Errorf("harness: the node's relay: %w", err)
	}
	r := &relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	r.up = sync.NewCond(&r.mu)
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.serve(c)
		}()
	}
}

// serve connects c, once the link is up, to the API server.
func (r *relay) serve(c net.Conn) {
	if !r.track(c) || !r.waitUp() {
		c.Close()
		return
	}
	s, err := net.Dial("tcp", r.target)
	if err != nil {
		r.untrack(c)
		c.Close()
		return
	}
	if !r.track(s) {
		c.Close()
		s.Close()
		return
	}
	var both sync.WaitGroup
	both.Add(2)
	go func() { defer both.Done(); r.pipe(s, c) }()
	go func() { defer both.Done(); r.pipe(c, s) }()
	both.Wait()
	r.untrack(c)
	r.untrack(s)
}

// pipe copies src to dst while the link is up; when src ends, dst is
// closed once the link is up, as its end would only then hear of it.
func (r *relay) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !r.waitUp() {
				break
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break // an end, a reset or a close: dst hears of it below
		}
	}
	r.waitUp()
	dst.Close()
	src.Close()
}

// waitUp blocks while the link is cut; false once the relay is closed.
func (r *relay) waitUp() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.cut && !r.closed {
		r.up.Wait()
	}
	return !r.closed
}

func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *relay) untrack(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, c)
}

// setCut cuts or heals the link.
func (r *relay) setCut(cut bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = cut
	r.up.Broadcast()
}

// close stops the relay and closes every connection.
func (r *relay) close() {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.up.Broadcast()
	r.mu.Unlock()
	r.ln.Close()
	r.wg.Wait()
}

package harness

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WatchDelayProxy is a reverse proxy in front of the API server that holds
// back every byte of every watch response for a fixed delay, so that an
// informer behind it lags that long behind the server: it learns of each
// change, including deletions, only after the delay. Other requests (GET,
// LIST, DELETE, ...) pass through at once, so a program behind it acts
// immediately but sees the result of its own acts late.
//
// It listens on 127.0.0.1 with plain HTTP and forwards to the API server
// over TLS, with the control plane's credentials: anything that can reach
// its port acts as a cluster administrator, as with the harness's other
// credentials. It is closed when the test ends.
type WatchDelayProxy struct {
	delay      time.Duration
	listener   net.Listener
	server     *http.Server
	kubeconfig string
	watches    atomic.Int64
}

// StartWatchDelayProxy starts a WatchDelayProxy with the given delay, and
// writes a kubeconfig for it (see [WatchDelayProxy.KubeconfigPath]). Pass
// "--kubeconfig="+p.KubeconfigPath() to [ControlPlane.StartOperator] after
// its other arguments' defaults: the last --kubeconfig wins.
func (cp *ControlPlane) StartWatchDelayProxy(delay time.Duration) (*WatchDelayProxy, error) {
	if delay < 0 {
		return nil, errors.New("harness: negative watch delay")
	}
	target, err := url.Parse(cp.apiURL)
	if err != nil {
		return nil, err
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &WatchDelayProxy{delay: delay, listener: listener}
	token := cp.config.BearerToken
	transport := &http.Transport{
		Proxy:             nil,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // the API server's certificate is self-signed
		ForceAttemptHTTP2: true,
		MaxIdleConns:      20,
		IdleConnTimeout:   30 * time.Second,
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
			// client-go sends no bearer token over plain HTTP; the proxy
			// authenticates for it.
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
		Transport:     transport,
		FlushInterval: -1, // pass every chunk on as soon as it is released
		ModifyResponse: func(resp *http.Response) error {
			if isWatchRequest(resp.Request) && resp.StatusCode == http.StatusOK {
				p.watches.Add(1)
				resp.Body = newDelayedBody(resp.Body, p.delay)
			}
			return nil
		},
		ErrorLog: nil,
	}
	p.server = &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go p.server.Serve(listener)

	p.kubeconfig = filepath.Join(cp.dir, "kubeconfig-watch-delay-"+strconv.Itoa(listener.Addr().(*net.TCPAddr).Port))
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.URL()}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "admin"}
	cfg.CurrentContext = "proxy"
	if err := clientcmd.WriteToFile(*cfg, p.kubeconfig); err != nil {
		p.Close()
		return nil, err
	}
	cp.t.Cleanup(func() {
		p.Close()
		transport.CloseIdleConnections()
	})
	return p, nil
}

// URL returns the proxy's address, http://127.0.0.1:PORT.
func (p *WatchDelayProxy) URL() string { return "http://" + p.listener.Addr().String() }

// KubeconfigPath returns a kubeconfig that reaches the API server through
// the proxy. It holds no credentials: the proxy adds the control plane's to
// every request it forwards.
func (p *WatchDelayProxy) KubeconfigPath() string { return p.kubeconfig }

// Delay returns how long watch responses are held back.
func (p *WatchDelayProxy) Delay() time.Duration { return p.delay }

// Watches returns how many watch responses the proxy has delayed so far.
func (p *WatchDelayProxy) Watches() int64 { return p.watches.Load() }

// Close stops the proxy and drops its connections. Closing twice does
// nothing.
func (p *WatchDelayProxy) Close() error {
	err := p.server.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func isWatchRequest(r *http.Request) bool {
	if r == nil {
		return false
	}
	switch r.URL.Query().Get("watch") {
	case "true", "1":
		return true
	}
	return false
}

// delayedBody returns the bytes of src, each no sooner than delay after it
// was read from src. A goroutine reads src ahead, so that the delay does not
// add up from chunk to chunk.
type delayedBody struct {
	src    io.ReadCloser
	delay  time.Duration
	chunks chan timedChunk
	done   chan struct{}
	once   sync.Once
	err    error // why src ended; read only after chunks is closed
	cur    []byte
}

type timedChunk struct {
	data []byte
	at   time.Time
}

func newDelayedBody(src io.ReadCloser, delay time.Duration) *delayedBody {
	b := &delayedBody{
		src:    src,
		delay:  delay,
		chunks: make(chan timedChunk, 4096),
		done:   make(chan struct{}),
	}
	go b.pump()
	return b
}

func (b *delayedBody) pump() {
	defer close(b.chunks)
	for {
		buf := make([]byte, 32<<10)
		n, err := b.src.Read(buf)
		if n > 0 {
			select {
			case b.chunks <- timedChunk{data: buf[:n], at: time.Now()}:
			case <-b.done:
				return
			}
		}
		if err != nil {
			b.err = err
			return
		}
	}
}

func (b *delayedBody) Read(p []byte) (int, error) {
	if len(b.cur) == 0 {
		var c timedChunk
		var ok bool
		select {
		case c, ok = <-b.chunks:
		case <-b.done:
			return 0, io.ErrClosedPipe
		}
		if !ok {
			if b.err == nil {
				return 0, io.EOF
			}
			return 0, b.err
		}
		if wait := time.Until(c.at.Add(b.delay)); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-b.done:
				timer.Stop()
				return 0, io.ErrClosedPipe
			}
		}
		b.cur = c.data
	}
	n := copy(p, b.cur)
	b.cur = b.cur[n:]
	return n, nil
}

func (b *delayedBody) Close() error {
	b.once.Do(func() { close(b.done) })
	return b.src.Close()
}

package status

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultListen is where watch serves its HTTP API unless -listen says
// otherwise: loopback only, since the API has no authentication.
const DefaultListen = "127.0.0.1:24864"

// The endpoints a Server serves.
const (
	PathStatus  = "/v1/status"
	PathEvents  = "/v1/events"
	PathMetrics = "/metrics"
)

// Timeouts of the HTTP server: generous for a scrape, short enough that a
// stuck client cannot hold a connection (and its goroutine) forever.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 60 * time.Second
)

// Server serves a Recorder over HTTP. Its caller owns it: Start, then
// Shutdown exactly when the service stops.
type Server struct {
	rec     *Recorder
	logger  hclog.Logger
	handler http.Handler

	mu       sync.Mutex
	srv      *http.Server
	addr     net.Addr
	done     chan struct{} // closed when the serving goroutine returns
	serveErr error
	// hosts are the Host headers accepted (host.go), set by Start.
	hosts hostCheck

	// connState, when set before Start, sees every connection's state
	// changes (http.Server.ConnState): tests wait on it for the server to
	// have accepted a connection.
	connState func(net.Conn, http.ConnState)

	opts ServerOptions
	// stopping is closed when Shutdown begins: it ends the event streams,
	// which would otherwise hold the shutdown until its deadline.
	stopping     chan struct{}
	stoppingOnce sync.Once
}

// ServerOptions add to what a Server serves.
type ServerOptions struct {
	// API serves the paths the status server does not (the object API
	// and the web UI, internal/api); without it they answer 404.
	API http.Handler
	// UI serves every other path (the web UI), unguarded: its pages read
	// through the guarded API with the visitor's credentials.
	UI http.Handler
	// Guard wraps every endpoint and API (the token, api.Auth), not the UI.
	Guard func(http.Handler) http.Handler
	// TLS, when set, serves HTTPS.
	TLS *tls.Config
}

// NewServer returns a Server for rec, logging to logger (nil: discard).
// Nothing listens until Start.
func NewServer(rec *Recorder, logger hclog.Logger) *Server {
	return NewServerWith(rec, logger, ServerOptions{})
}

// NewServerWith is NewServer serving opts too.
func NewServerWith(rec *Recorder, logger hclog.Logger, opts ServerOptions) *Server {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &Server{rec: rec, logger: logger, opts: opts, stopping: make(chan struct{})}
	guarded := s.routes()
	if opts.Guard != nil {
		guarded = opts.Guard(guarded)
	}
	h := guarded
	if opts.UI != nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isAPIPath(r.URL.Path) {
				guarded.ServeHTTP(w, r)
				return
			}
			opts.UI.ServeHTTP(w, r)
		})
	}
	s.handler = s.checkHost(h)
	return s
}

// Handler is the API as an http.Handler: what Start serves, for tests and
// for mounting elsewhere.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on listen (host:port; "" means DefaultListen; port 0 picks
// a free one, see Addr) and serves in a goroutine that Shutdown ends. It
// returns the listen error, such as the address being in use, at once.
func (s *Server) Start(listen string) error {
	if listen == "" {
		listen = DefaultListen
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return errors.New("status server: already started")
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("status server: listen on %s: %w", listen, err)
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ConnState:         s.connState,
		ErrorLog:          s.logger.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}),
	}
	if s.opts.TLS != nil {
		ln = tls.NewListener(ln, s.opts.TLS)
	}
	s.srv, s.addr, s.done = srv, ln.Addr(), make(chan struct{})
	s.hosts = newHostCheck(listen, ln.Addr())
	s.logger.Info("serving status", "address", s.addr.String())
	go func(done chan struct{}) {
		defer close(done)
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			return
		}
		s.logger.Error("status server stopped", "error", err)
		s.mu.Lock()
		s.serveErr = fmt.Errorf("status server: serve on %s: %w", ln.Addr(), err)
		s.mu.Unlock()
	}(s.done)
	return nil
}

// Addr is the address being served (with the port chosen for port 0), or
// nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Shutdown stops listening, lets the requests in flight finish until ctx
// ends, then closes what remains. It returns once the serving goroutine has
// ended, with ctx's error if requests had to be cut off, or the error that
// stopped serving early. Shutdown before Start, or twice, does nothing.
//
// Give ctx a deadline: net/http counts a connection that was opened but has
// sent nothing yet as busy for up to 5 s, and a client stuck mid-request as
// busy until it gives up.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv, done := s.srv, s.done
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	s.stoppingOnce.Do(func() { close(s.stopping) })
	err := srv.Shutdown(ctx)
	if err != nil {
		// The deadline passed with requests still running: cut them off.
		// Close does not wait for handlers, but ours never block.
		err = errors.Join(fmt.Errorf("status server: shutdown: %w", err), srv.Close())
	}
	<-done
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(err, s.serveErr)
}

// isAPIPath: the paths the guard covers; the UI has the others.
func isAPIPath(p string) bool {
	return strings.HasPrefix(p, "/v1/") || p == PathMetrics
}

func (s *Server) routes() http.Handler {
	metrics := promhttp.HandlerFor(s.rec.Gatherer(), promhttp.HandlerOpts{
		ErrorLog: s.logger.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
		// A collector failing (the process collector on an odd kernel)
		// should not blank the whole scrape.
		ErrorHandling: promhttp.ContinueOnError,
	})
	byPath := map[string]http.Handler{
		PathStatus:  http.HandlerFunc(s.serveStatus),
		PathEvents:  http.HandlerFunc(s.serveEvents),
		PathMetrics: metrics,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := byPath[r.URL.Path]
		if !ok && s.opts.API != nil {
			s.opts.API.ServeHTTP(w, r)
			return
		}
		if !ok {
			writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path+
				" (try "+PathStatus+", "+PathEvents+" or "+PathMetrics+")")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) serveStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.rec.Status())
}

// serveEvents answers GET /v1/events[?since=RFC3339][&after=SEQ][&limit=N].
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	if wantsStream(r) {
		s.serveStream(w, r)
		return
	}
	q, err := parseEventQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s.rec.Events(q))
}

// parseEventQuery reads the query parameters of /v1/events. An empty
// parameter is the same as a missing one.
func parseEventQuery(v map[string][]string) (EventQuery, error) {
	get := func(name string) string {
		if vs := v[name]; len(vs) > 0 {
			return strings.TrimSpace(vs[0])
		}
		return ""
	}
	var q EventQuery
	if since := get("since"); since != "" {
		// An unencoded "+02:00" offset arrives as " 02:00": restore it.
		t, err := time.Parse(time.RFC3339Nano, strings.ReplaceAll(since, " ", "+"))
		if err != nil {
			return q, fmt.Errorf("since: want an RFC 3339 time such as 2024-05-01T12:00:00Z, got %q", since)
		}
		q.Since = t
	}
	if after := get("after"); after != "" {
		n, err := strconv.ParseUint(after, 10, 64)
		if err != nil {
			return q, fmt.Errorf("after: want an event sequence number (0 or more), got %q", after)
		}
		q.After = n
	}
	if limit := get("limit"); limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 {
			return q, fmt.Errorf("limit: want a whole number of 1 or more, got %q", limit)
		}
		q.Limit = n
	}
	return q, nil
}

type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Error: msg})
}

// writeJSON writes v indented, for people reading it with curl.
func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		// Our types always marshal; this is a bug, say so plainly.
		code = http.StatusInternalServerError
		body, _ = json.Marshal(errorBody{Error: "encode response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// DefaultTimeout bounds every verb (-api-timeout).
const DefaultTimeout = 10 * time.Minute

// MaxBody bounds a request body: a stack's files fit many times over.
const MaxBody = 8 << 20

// Options configure a Server.
type Options struct {
	Runner Runner
	// Timeout bounds each run (default DefaultTimeout).
	Timeout time.Duration
	Logger  hclog.Logger
}

// Server serves the objects, their verbs and the remote CLI's endpoint.
// Close it when watch stops: it interrupts the runs in flight and waits
// for them.
type Server struct {
	ss      *sessions
	timeout time.Duration
	log     hclog.Logger
	mux     *http.ServeMux
	cancel  context.CancelFunc
}

// New returns a Server running commands through opts.Runner.
func New(opts Options) *Server {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{ss: newSessions(ctx, opts.Runner, opts.Timeout), timeout: opts.Timeout, log: opts.Logger, mux: http.NewServeMux(), cancel: cancel}
	s.routes()
	return s
}

// Handler serves the API's paths (every /v1/ path but /v1/status and
// /v1/events, which the status server serves).
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A verb runs up to the timeout: the server's write deadline is
		// for quick answers.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.timeout + time.Minute))
		s.mux.ServeHTTP(w, r)
	})
}

// Close interrupts the runs in flight and returns once they have ended.
func (s *Server) Close() {
	s.cancel()
	s.ss.close()
}

func (s *Server) routes() {
	m := s.mux
	m.Handle("GET /v1/state", s.read(func(*http.Request) []string { return []string{"show", "-json"} }))
	m.Handle("GET /v1/outputs", s.read(func(*http.Request) []string { return []string{"output", "-json"} }))
	m.Handle("GET /v1/groups", s.read(func(*http.Request) []string { return []string{"group", "ls", "-json"} }))
	m.Handle("GET /v1/groups/{name}", s.read(named("group", "describe")))
	m.Handle("GET /v1/groups/{name}/instances", s.read(named("group", "ls")))
	m.Handle("GET /v1/groups/{name}/size", http.HandlerFunc(s.size))
	m.Handle("GET /v1/loadbalancers/{name}/routes", s.read(named("lb", "routes", "ls")))
	m.Handle("GET /v1/loadbalancers/{name}/backends", s.read(named("lb", "backends", "ls")))
	m.Handle("GET /v1/ingresses/{name}", s.read(named("ingress", "describe")))
	m.Handle("GET /v1/enrollments/{name}", s.read(named("enrollment", "describe")))

	m.Handle("POST /v1/groups/{name}/scale", s.verb(scaleArgs))
	m.Handle("POST /v1/groups/{name}/destroy-instances", s.verb(destroyInstancesArgs))
	for _, v := range []struct{ kind, verb string }{
		{"groups", "free"}, {"groups", "destroy"}, {"groups", "stop-update"},
		{"ingresses", "free"}, {"ingresses", "destroy"}, {"enrollments", "free"}, {"enrollments", "destroy"},
	} {
		m.Handle("POST /v1/"+v.kind+"/{name}/"+v.verb, s.verb(simpleVerb(v.kind, v.verb)))
	}
	m.Handle("POST /v1/plan", http.HandlerFunc(s.plan))
	m.Handle("POST /v1/apply", http.HandlerFunc(s.apply))
	m.Handle("POST /v1/cli", http.HandlerFunc(s.cli))
	m.Handle("POST /v1/cli/{session}", http.HandlerFunc(s.answer))
	m.Handle("/v1/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, "No such endpoint", r.Method+" "+r.URL.Path+" is not part of the API (see website/api.md)")
	}))
}

// named is the argv of a read of the object named in the path, as JSON.
func named(words ...string) func(*http.Request) []string {
	return func(r *http.Request) []string {
		return append(append(words[:len(words):len(words)], "-json", "--"), r.PathValue("name"))
	}
}

// run runs argv (words and arguments, split by commandWords) with no
// client files and nobody to ask, and returns its reply.
func (s *Server) run(r *http.Request, argv []string, files map[string][]byte) (Reply, error) {
	words, args := commandWords(argv)
	sess, err := s.ss.start(Command{Words: words, Args: args}, files, "")
	if err != nil {
		return Reply{}, err
	}
	rep := sess.wait(r.Context())
	if rep.Question != "" {
		// The API's verbs are approved by being sent; a command that asks
		// anyway is answered no.
		rep, err = s.ss.resume(r.Context(), rep.Session, "")
	}
	return rep, err
}

// read answers a read with the command's -json output, or its error.
func (s *Server) read(argv func(*http.Request) []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep, err := s.run(r, argv(r), nil)
		if err != nil {
			WriteError(w, http.StatusInternalServerError, "Error running the command", err.Error())
			return
		}
		if rep.ExitCode != 0 {
			writeFailure(w, rep)
			return
		}
		if !json.Valid([]byte(rep.Stdout)) {
			WriteError(w, http.StatusInternalServerError, "The command printed no JSON", rep.Stdout+rep.Stderr)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte(rep.Stdout))
	})
}

// size answers {"group", "size"}, what `group scale NAME` prints.
func (s *Server) size(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	rep, err := s.run(r, []string{"group", "scale", "--", name}, nil)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "Error running the command", err.Error())
		return
	}
	if rep.ExitCode != 0 {
		writeFailure(w, rep)
		return
	}
	n, err := strconv.Atoi(strings.TrimSpace(rep.Stdout))
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "The command printed no size", rep.Stdout)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"group": name, "size": n})
}

// verb answers a POST with the reply of the argv its body makes.
func (s *Server) verb(argv func(r *http.Request, body verbBody) ([]string, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body verbBody
		if !decode(w, r, &body) {
			return
		}
		args, err := argv(r, body)
		if err != nil {
			WriteError(w, http.StatusBadRequest, "Bad request", err.Error())
			return
		}
		rep, err := s.run(r, args, nil)
		if err != nil {
			WriteError(w, http.StatusInternalServerError, "Error running the command", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, rep)
	})
}

// verbBody is the body of every object verb; each reads what it needs.
type verbBody struct {
	Size        *int     `json:"size"`
	IDs         []string `json:"ids"`
	Parallelism int      `json:"parallelism"`
	// Override is group scale's -override (an autoscaled group).
	Override bool `json:"override"`
}

func (b verbBody) flags() []string {
	if b.Parallelism > 0 {
		return []string{"-parallelism=" + strconv.Itoa(b.Parallelism)}
	}
	return nil
}

func scaleArgs(r *http.Request, b verbBody) ([]string, error) {
	if b.Size == nil || *b.Size < 0 {
		return nil, errors.New(`give the new size: {"size": N}, N at least 0`)
	}
	argv := append([]string{"group", "scale"}, b.flags()...)
	if b.Override {
		argv = append(argv, "-override")
	}
	return append(argv, "--", r.PathValue("name"), strconv.Itoa(*b.Size)), nil
}

func destroyInstancesArgs(r *http.Request, b verbBody) ([]string, error) {
	if len(b.IDs) == 0 {
		return nil, errors.New(`name the instances to destroy: {"ids": ["ID", ...]}`)
	}
	argv := append(append([]string{"group", "destroy-instances"}, b.flags()...), "--", r.PathValue("name"))
	return append(argv, b.IDs...), nil
}

// simpleVerb is free, destroy (approved by the request) or stop-update of
// a group, an ingress or an enrollment.
func simpleVerb(kind, verb string) func(*http.Request, verbBody) ([]string, error) {
	noun := map[string]string{"groups": "group", "ingresses": "ingress", "enrollments": "enrollment"}[kind]
	return func(r *http.Request, b verbBody) ([]string, error) {
		argv := []string{noun, verb}
		if verb == "destroy" {
			argv = append(argv, "-auto-approve")
			if kind == "groups" {
				argv = append(argv, b.flags()...)
			}
		}
		return append(argv, "--", r.PathValue("name")), nil
	}
}

// decode reads a JSON body of at most MaxBody into v; an empty body is {}.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var tooBig *http.MaxBytesError
	switch {
	case err == nil || errors.Is(err, io.EOF):
		return true
	case errors.As(err, &tooBig):
		WriteError(w, http.StatusRequestEntityTooLarge, "Request too large", fmt.Sprintf("a request body is at most %d bytes", MaxBody))
	default:
		WriteError(w, http.StatusBadRequest, "Bad request body", err.Error())
	}
	return false
}

package watch

import (
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/api"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// APIOptions configure the object API and the web UI watch serves beside
// /v1/status, /v1/events and /metrics (internal/api).
type APIOptions struct {
	// Runner runs the API's commands; without it only the status
	// endpoints are served (tests of the service alone).
	Runner api.Runner
	// Token says where the token comes from (api.LoadToken).
	Token api.TokenSource
	// PublicRead lets reads through without the token.
	PublicRead bool
	// TLS names the certificate, key and client CA of HTTPS.
	TLS api.TLSFiles
	// Timeout bounds each verb (api.DefaultTimeout).
	Timeout time.Duration
	// UI, when set, makes the web UI, given the API to read through; it
	// serves every path the API does not.
	UI func(api http.Handler) http.Handler
}

// serving is what the HTTP server is built of; close ends the API's runs
// once the server no longer takes requests.
type serving struct {
	srv       *status.Server
	api       *api.Server
	tokenFrom string
	scheme    string
}

func (s *serving) close() {
	if s.api != nil {
		s.api.Close()
	}
}

// newServing checks that the address may be served as asked, loads the
// token and builds the server.
func newServing(opts Options, rec *status.Recorder, log hclog.Logger) (*serving, error) {
	a := opts.API
	if err := api.CheckListen(opts.Listen, a.TLS.Enabled()); err != nil {
		return nil, err
	}
	tlsCfg, err := a.TLS.Config()
	if err != nil {
		return nil, err
	}
	out := &serving{scheme: a.TLS.Scheme()}
	if a.Runner == nil {
		out.srv = status.NewServerWith(rec, log.Named("http"), status.ServerOptions{TLS: tlsCfg})
		return out, nil
	}
	if a.Token.WorkDir == "" {
		a.Token.WorkDir = opts.WorkDir
	}
	token, from, err := api.LoadToken(a.Token)
	if err != nil {
		return nil, err
	}
	out.tokenFrom = from
	out.api = api.New(api.Options{Runner: a.Runner, Timeout: a.Timeout, Logger: log.Named("api")})
	auth := api.NewAuth(token, a.PublicRead, log.Named("api"), rec.Registerer())
	so := status.ServerOptions{API: out.api.Handler(), Guard: auth.Wrap, TLS: tlsCfg}
	if a.UI != nil {
		// The UI reads through the whole API, guard included, with the
		// visitor's credentials: it is built before the server it reads.
		so.UI = a.UI(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			out.srv.Handler().ServeHTTP(w, r)
		}))
	}
	out.srv = status.NewServerWith(rec, log.Named("http"), so)
	log.Info("API token", "from", from, "public_read", a.PublicRead)
	return out, nil
}

package api

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// CookieName is the cookie the web UI keeps the token in after sign-in.
// It authenticates reads only: a write needs the token in the
// Authorization header, which another site's page cannot make a browser
// send (no cross-site request forgery).
const CookieName = "infrakit_token"

// Auth guards a handler with the bearer token.
type Auth struct {
	// Token is the secret; PublicRead lets GET and HEAD through without it.
	Token      string
	PublicRead bool
	Logger     hclog.Logger
	failures   *prometheus.CounterVec
}

// NewAuth returns the guard, counting failures on reg (nil: not counted).
func NewAuth(token string, publicRead bool, logger hclog.Logger, reg prometheus.Registerer) *Auth {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	a := &Auth{Token: token, PublicRead: publicRead, Logger: logger,
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "infrakit_api_auth_failures_total",
			Help: "API requests refused for a missing or wrong token, by reason.",
		}, []string{"reason"})}
	for _, r := range []string{"missing", "wrong"} {
		a.failures.WithLabelValues(r) // shown at 0 before the first failure
	}
	if reg != nil {
		reg.MustRegister(a.failures)
	}
	return a
}

// Wrap answers 401 to a request without the token (or with another),
// unless it is a read and reads are public; next never sees it.
func (a *Auth) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		if a.PublicRead && (read || isCLIRead(r)) {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := credential(r, read)
		switch {
		case !ok:
			a.refuse(w, r, "missing", "No API token",
				"Send the token of this watch (its .infrakit/api-token, -token-file or INFRAKIT_TOKEN) as \"Authorization: Bearer TOKEN\".")
		case subtle.ConstantTimeCompare([]byte(got), []byte(a.Token)) != 1:
			a.refuse(w, r, "wrong", "Wrong API token",
				"The token sent is not this watch's (its .infrakit/api-token, -token-file or INFRAKIT_TOKEN).")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// credential is the bearer token of r, or for a read the UI's cookie.
func credential(r *http.Request, read bool) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", true // present but not a bearer token: wrong
		}
		return strings.TrimSpace(token), true
	}
	if read {
		if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
			return c.Value, true
		}
	}
	return "", false
}

func (a *Auth) refuse(w http.ResponseWriter, r *http.Request, reason, summary, detail string) {
	a.failures.WithLabelValues(reason).Inc()
	a.Logger.Warn("API request refused", "reason", reason+" token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	w.Header().Set("WWW-Authenticate", `Bearer realm="infrakit"`)
	WriteError(w, http.StatusUnauthorized, summary, detail)
}

// isCLIRead reports whether r is a POST /v1/cli of one of ReadCommands:
// with -public-read the remote CLI's reads pass without the token, as
// GET reads do. (Only there: a cookie does not authenticate it, as it
// does not any POST.) The body is read to know, and put back for the
// handler.
func isCLIRead(r *http.Request) bool {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/cli" {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil {
		return false
	}
	var req struct {
		Command string `json:"command"`
	}
	return json.Unmarshal(body, &req) == nil && slices.Contains(ReadCommands, req.Command)
}

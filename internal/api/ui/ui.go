package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Options configure the UI.
type Options struct {
	// Logger logs the API calls that fail for another reason than the
	// visitor's (nil: discard).
	Logger hclog.Logger
	// Version is infrakit's version, shown in every page's footer.
	Version string
}

// New returns the web UI handler. api is the JSON API (internal/api's
// handler for /v1/...), which the pages call in-process with the
// visitor's credentials. Mount it at "/" for every path that is not the
// API's (/v1/..., /metrics).
func New(api http.Handler, opts Options) http.Handler {
	return newSite(api, opts, time.Now).handler()
}

// site is the UI: its pages, their templates, the API they read.
type site struct {
	api     http.Handler
	log     hclog.Logger
	version string
	now     func() time.Time
	pages   map[string]*template.Template
	// assets is the version of the embedded static files, appended to
	// their URLs so a new binary's are never taken from a cache.
	assets string
}

// pageNames are the templates under templates/ other than layout.html,
// each a page rendered inside the layout.
var pageNames = []string{"overview", "group", "loadbalancer", "enrollment", "events", "login", "confirm", "result", "error"}

func newSite(api http.Handler, opts Options, now func() time.Time) *site {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	s := &site{api: api, log: opts.Logger, version: opts.Version, now: now, pages: map[string]*template.Template{}}
	base := template.Must(template.New("layout.html").Funcs(s.funcs()).ParseFS(templateFiles, "templates/layout.html", "templates/parts.html"))
	for _, name := range pageNames {
		s.pages[name] = template.Must(template.Must(base.Clone()).ParseFS(templateFiles, "templates/"+name+".html"))
	}
	s.assets = assetsVersion()
	return s
}

// assetsVersion hashes the embedded static files.
func assetsVersion() string {
	h := sha256.New()
	_ = fs.WalkDir(staticFiles, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFiles.ReadFile(path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func (s *site) handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", s.overview)
	m.HandleFunc("GET /groups/{name}", s.group)
	m.HandleFunc("POST /groups/{name}/{verb}", s.groupVerb)
	m.HandleFunc("GET /loadbalancers/{name}", s.loadBalancer)
	m.HandleFunc("GET /enrollments/{name}", s.enrollment)
	m.HandleFunc("GET /events", s.events)
	m.HandleFunc("GET /login", s.loginForm)
	m.HandleFunc("POST /login", s.login)
	m.HandleFunc("GET /logout", s.logout)
	m.HandleFunc("POST /logout", s.logout)
	static, _ := fs.Sub(staticFiles, "static")
	files := http.StripPrefix("/static/", http.FileServerFS(static))
	m.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("v") == s.assets {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		files.ServeHTTP(w, r)
	}))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, &apiError{Status: http.StatusNotFound, Summary: "No such page",
			Detail: r.URL.Path + " is not a page of the web UI."})
	})
	return secureHeaders(m)
}

// secureHeaders: no script, style or connection but this server's, no
// framing, no referrer leaving.
func secureHeaders(next http.Handler) http.Handler {
	const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// layout is what every page passes its template: the page's own data
// and what the layout shows around it.
type layout struct {
	Title string
	// Nav is the navigation entry of the page ("overview", "events", ""
	// for none).
	Nav      string
	SignedIn bool
	Version  string
	Assets   string
	// Path is the page's path, where the sign-in form returns to.
	Path string
	// LastSeq is the newest event the page shows; the script streams
	// the later ones. Live is false on pages without an event list.
	Live    bool
	LastSeq uint64
	// Group, when set, keeps the page's live event list to one group.
	Group string
	Page  any
}

// render writes page name with status.
func (s *site) render(w http.ResponseWriter, r *http.Request, status int, name string, l layout) {
	l.Version, l.Assets = s.version, s.assets
	if l.Path == "" {
		l.Path = r.URL.Path
	}
	if _, err := r.Cookie(cookieName); err == nil {
		l.SignedIn = true
	}
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, "layout.html", l); err != nil {
		s.log.Error("web UI page failed to render", "page", name, "error", err)
		http.Error(w, "the page failed to render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders what went wrong reading the API: the sign-in form when it
// wants the token, the error otherwise.
func (s *site) fail(w http.ResponseWriter, r *http.Request, err error) {
	if unauthorized(err) {
		s.renderLogin(w, r, http.StatusUnauthorized, r.URL.RequestURI(), "")
		return
	}
	ae, ok := err.(*apiError)
	if !ok {
		s.log.Error("web UI: calling the API failed", "path", r.URL.Path, "error", err)
		ae = &apiError{Status: http.StatusInternalServerError, Summary: "The API could not be called", Detail: err.Error()}
	}
	if ae.Status >= 500 {
		s.log.Warn("web UI: the API failed", "path", r.URL.Path, "status", ae.Status, "error", ae.Error())
	}
	s.render(w, r, ae.Status, "error", layout{Title: ae.Summary, Page: ae})
}

package command

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/api"
	"github.com/infrakit/infrakit/internal/api/ui"
	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/watch"
	"github.com/infrakit/infrakit/internal/watch/heal"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// WatchCommand is `infrakit watch`: the self-healing service.
type WatchCommand struct {
	Meta
}

// Run runs the service until the first SIGINT or SIGTERM, then stops
// cleanly and exits 0. It exits 1 when it cannot start.
func (c *WatchCommand) Run(args []string) int {
	fs := c.FlagSet("watch")
	interval := fs.Duration("interval", watch.DefaultInterval, "how often every group is listed again")
	listen := fs.String("listen", status.DefaultListen, "where the HTTP API is served (host:port)")
	lockTimeout := FlagLockTimeout(fs)
	parallelism := fs.Int("parallelism", operation.DefaultParallelism, "provider calls in flight at once")
	brakeSettle := fs.Duration("brake-settle", heal.DefaultBrakeSettle, "how long the mass-failure brake holds after the world last changed")
	callTimeout := fs.Duration("call-timeout", watch.DefaultCallTimeout, "deadline of each provider call")
	files := flagStackInputs(fs)
	tokenFile := fs.String("token-file", "", "read the API token from this file (default: INFRAKIT_TOKEN, else .infrakit/api-token, made at first start)")
	publicRead := fs.Bool("public-read", false, "let reads of the API through without the token")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS with this PEM certificate")
	tlsKey := fs.String("tls-key", "", "the PEM key of -tls-cert")
	tlsClientCA := fs.String("tls-client-ca", "", "require client certificates signed by this PEM CA")
	apiTimeout := fs.Duration("api-timeout", api.DefaultTimeout, "deadline of each verb the API runs")
	rest, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	switch {
	case len(rest) > 0:
		c.Ui.Error(fmt.Sprintf("The watch command takes no arguments; got %q.\n", rest))
		return cli.RunResultHelp
	case *interval <= 0:
		c.Ui.Error(fmt.Sprintf("-interval must be a positive duration such as 10s; got %s.\n", *interval))
		return cli.RunResultHelp
	case *brakeSettle <= 0:
		c.Ui.Error(fmt.Sprintf("-brake-settle must be a positive duration such as 30s; got %s.\n", *brakeSettle))
		return cli.RunResultHelp
	case *parallelism < 1:
		c.Ui.Error(fmt.Sprintf("-parallelism must be at least 1; got %d.\n", *parallelism))
		return cli.RunResultHelp
	case *callTimeout <= 0:
		c.Ui.Error(fmt.Sprintf("-call-timeout must be a positive duration such as 2m; got %s.\n", *callTimeout))
		return cli.RunResultHelp
	case *apiTimeout <= 0:
		c.Ui.Error(fmt.Sprintf("-api-timeout must be a positive duration such as 10m; got %s.\n", *apiTimeout))
		return cli.RunResultHelp
	}
	path := func(p string) string { // "" stays unset
		if p == "" {
			return ""
		}
		return c.Path(p)
	}
	tlsFiles := api.TLSFiles{Cert: path(*tlsCert), Key: path(*tlsKey), ClientCA: path(*tlsClientCA)}
	scheme := tlsFiles.Scheme()
	token := api.TokenSource{Env: os.Getenv(api.TokenEnv), File: path(*tokenFile)}

	// SIGHUP reloads; the first SIGINT or SIGTERM cancels Context() (main's
	// NotifyShutdown), and a second one kills the process.
	reload, stopReload := c.notifyReload()
	defer stopReload()

	log := c.serviceLogger()
	idleGC, hostEnv := watchGC(os.LookupEnv)
	err = watch.Run(c.Context(), watch.Options{
		WorkDir:       c.WorkDir,
		HostEnv:       hostEnv,
		IdleGCPercent: idleGC,
		ExtraFiles:    c.stackFilePaths(*files),
		Inputs:        c.inputs(),
		Interval:      *interval,
		Listen:        *listen,
		LockTimeout:   *lockTimeout,
		Parallelism:   *parallelism,
		BrakeSettle:   *brakeSettle,
		CallTimeout:   *callTimeout,
		Reload:        reload,
		Logger:        log,
		Version:       c.Version,
		API: watch.APIOptions{
			Runner: APIRunner{Meta: c.Meta}, Token: token, PublicRead: *publicRead, TLS: tlsFiles, Timeout: *apiTimeout,
			UI: func(h http.Handler) http.Handler {
				return ui.New(h, ui.Options{Logger: log.Named("ui"), Version: c.Version})
			},
		},
		Ready: func(addr net.Addr) {
			c.Ui.Output(fmt.Sprintf("infrakit watch: serving %s://%s%s (pid %d); Ctrl-C or SIGTERM stops, SIGHUP reloads.",
				scheme, addr, status.PathStatus, os.Getpid()))
			c.Ui.Output(fmt.Sprintf("infrakit watch: the web UI is at %s://%s/", scheme, addr))
		},
	})
	if err != nil {
		summary := "Error starting watch"
		if errors.Is(err, watch.ErrAlreadyRunning) {
			summary = "Watch is already running"
		}
		c.showError(summary, err)
		return 1
	}
	c.Ui.Output("infrakit watch stopped.")
	return 0
}

// watchGOGC is the garbage collector's target for the providers watch
// launches, and for watch itself while it is idle. A watch is a service
// that holds its stack's members in memory and is idle nearly all the
// time: with Go's default (100) a process's heap grows to twice what it
// holds between collections, and watch and its three providers of the
// walk-through stack with 10,000 cattle held 222 MiB; at 50 they hold
// about 185, for no measurable idle CPU (0.77 % of a core before, 0.80 to
// 0.90 % after). watch keeps the default while it works: at 50 throughout,
// its heals took about a fifth longer (more collections on their path).
const watchGOGC = 50

// watchGC is watch's GC percent while idle and the environment it adds
// for its providers: watchGOGC, unless GOGC is set (which then holds for
// watch throughout, and the providers inherit). idle 0: leave it.
func watchGC(lookup func(string) (string, bool)) (idle int, hostEnv []string) {
	if _, set := lookup("GOGC"); set {
		return 0, nil
	}
	return watchGOGC, []string{fmt.Sprintf("GOGC=%d", watchGOGC)}
}

// serviceLogger is the command's logger. A service with no log says nothing
// of what it does, so without INFRAKIT_LOG and INFRAKIT_LOG_PATH watch
// logs at info to stderr.
func (c *WatchCommand) serviceLogger() hclog.Logger {
	if os.Getenv("INFRAKIT_LOG") != "" || os.Getenv("INFRAKIT_LOG_PATH") != "" || c.Logger == nil {
		if c.Logger == nil {
			return hclog.NewNullLogger()
		}
		return c.Logger.Named("watch")
	}
	return hclog.New(&hclog.LoggerOptions{Name: "infrakit.watch", Level: hclog.Info, Output: c.Stderr, Color: hclog.ColorOff})
}

// notifyReload turns SIGHUP into reload requests until stop is called.
func (c *WatchCommand) notifyReload() (<-chan struct{}, func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP)
	reload := make(chan struct{}, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-sigs:
				select {
				case reload <- struct{}{}:
				default: // one is pending already
				}
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return reload, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			wg.Wait()
		})
	}
}

// Synopsis is the one-line description in `infrakit -help`.
func (c *WatchCommand) Synopsis() string {
	return "Keep the applied stack converged: heal, roll, serve status"
}

// Help is the text of `infrakit watch -help`.
func (c *WatchCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] watch [options]

  Runs until stopped, keeping every group of the applied stack (the one
  the state holds, as "infrakit apply" and "infrakit group scale" left it)
  converged: instances that vanish or stay unhealthy past their grace are
  replaced, out-of-date instances are rolled as the group's update block
  allows, and the providers are kept running (relaunched if they crash).

  A pass runs every -interval, at once when a provider reports a change,
  when a command changes the state, and on SIGHUP. Each pass takes the
  state lock only while it acts, so the other commands keep working. With
  the local state file a second watch on the same state refuses to start.
  With the etcd backend (recorded by "infrakit init") several watch
  processes elect a leader: it alone acts, the others follow, observing
  and serving read-only status, and one takes over when it fails. With
  scale_out = true in the etcd backend block they share the work instead:
  each group, ingress and enrollment is leased to one watch at a time,
  which alone acts on it, and the share of one that stops moves to the
  others. A watch refuses to start beside watch processes of the other
  mode.

  Signals: SIGINT or SIGTERM stop after the work in flight (exit 0 within
  30s; a leader then resigns, so another watch leads at once, and a
  scale-out watch hands its share over); a second
  one exits at once. SIGHUP reads the state, the provider
  lock file and the stack files again; stack files reach watch through
  "infrakit apply", and ones that do not load are reported in the log.

  Logs go to stderr at info level unless INFRAKIT_LOG or INFRAKIT_LOG_PATH
  says otherwise. The providers watch launches run with GOGC=50, and
  watch itself while nothing is in flight (a smaller heap for an idle
  service), unless GOGC is set.

Options:

  -interval D         How often every group is listed again (default 10s).
                      A group of more than 1,000 whose provider announces
                      its changes (and whose health is its instances'
                      state) is listed every D x members/1,000, at most
                      every 5m.

  -listen ADDR        Where to serve the HTTP API, the web UI and /metrics
                      (default 127.0.0.1:24864; port 0 picks one). An
                      address that is not loopback needs -tls-cert and
                      -tls-key.

  -token-file FILE    Read the API token from FILE (mode 0600). Without
                      it, INFRAKIT_TOKEN gives the token, else
                      .infrakit/api-token, which watch makes at its first
                      start. Writes always need the token.

  -public-read        Let reads (GET) of the API and the UI, and the
                      remote CLI's reads (group ls, show ...), through
                      without the token.

  -tls-cert FILE      Serve HTTPS with this PEM certificate (and -tls-key).

  -tls-key FILE       The PEM private key of -tls-cert.

  -tls-client-ca FILE Also require every client to present a certificate
                      signed by this PEM CA.

  -api-timeout D      The deadline of each verb the API runs (default 10m).

  -lock-timeout D     How long a pass waits for the state lock (default 30s).

  -parallelism N      Provider calls in flight at once per group, and groups
                      reconciled at once (default 10).

  -brake-settle D     The mass-failure brake's settle time (default 30s):
                      deaths within D of each other count together, the
                      brake holds until a re-list at least D after the
                      world last changed confirms it, and after a release
                      replacements go at a bounded rate per D.

  -call-timeout D     The deadline of each provider call (default 2m). A
                      provider whose call runs out of time and that then
                      does not answer a metadata request (within D/4,
                      between 1s and 5s) is killed and relaunched.

  -var NAME=VALUE      Set the stack variable NAME. The text is the value
                       of a string, number or bool variable, and an HCL
                       expression (["a", "b"], { k = "v" }) for other
                       types. Repeatable.

  -var-file FILE       Read variable values from FILE: name = value lines
                       in HCL, or a JSON object when FILE ends in .json.
                       Repeatable. -var and -var-file apply in the order
                       given, over INFRAKIT_VAR_NAME in the environment,
                       infrakit.ivars and *.auto.ivars.

  -f FILE             Also read FILE as a stack file when the stack files
                      are read again (SIGHUP). Repeatable. Pass the files
                      the stack was applied with, or a reload reports that
                      the stack files differ from the applied stack.
`)
}

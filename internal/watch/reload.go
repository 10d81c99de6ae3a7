package watch

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/pluginhost"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// reload is SIGHUP. watch enforces the applied stack, the one the state
// holds (as `apply` and `group scale` left it), not the stack files: the
// files reach the state through `apply`, after a plan a person can read.
// So a reload:
//   - reads the state again (as when the CLI changes it);
//   - reads the provider lock file again, and when `infrakit init` changed
//     it (an upgrade), relaunches the providers from it once no pass is
//     using them; a lock file that does not load keeps the providers as
//     they are;
//   - loads and validates the stack files (the working directory's and
//     Options.ExtraFiles, the -f files), and logs what it finds: their
//     diagnostics when they do not load, or which groups differ from the
//     applied stack (`infrakit apply` would change them). Warnings are
//     logged when they differ from those the last reload logged, so a
//     stack that keeps a warning does not repeat it at every SIGHUP.
//
// What it found is recorded as one "reload" event.
func (s *service) reload(ctx context.Context) {
	if len(s.opts.ExtraFiles) > 0 {
		s.log.Info("reloading: the state, the provider lock file and the stack files", "extra_files", s.opts.ExtraFiles)
	} else {
		s.log.Info("reloading: the state, the provider lock file and the stack files")
	}
	var notes []string
	doc, err := readState(ctx, s.store)
	if err != nil {
		s.log.Error("reload: reading the state", "error", err)
		notes = append(notes, "the state could not be read ("+err.Error()+"); watch keeps the one it had")
		doc = s.doc
	} else {
		s.setDoc(ctx, doc)
		notes = append(notes, fmt.Sprintf("state serial %d", doc.Serial))
	}

	lock, err := readLockFile(s.opts.WorkDir)
	switch {
	case err != nil:
		s.log.Error("reload: reading the provider lock file", "error", err)
		notes = append(notes, "the provider lock file could not be read; the providers keep running as they are")
	case !bytes.Equal(lock, s.lockFile):
		if _, lerr := pluginhost.LoadLock(s.opts.WorkDir); lerr != nil {
			s.log.Error("reload: the provider lock file does not load; the providers keep running as they are", "error", lerr)
			notes = append(notes, "the provider lock file does not load; the providers keep running as they are")
			break
		}
		s.lockFile, s.resetHost = lock, true
		s.log.Info("reload: the provider lock file changed; relaunching the providers")
		notes = append(notes, "the provider lock file changed: the providers are relaunched")
	}

	st, files, diags := s.runner.LoadStack(ctx)
	switch {
	case diags.HasErrors():
		var b bytes.Buffer
		_ = config.WriteDiagnostics(&b, files, diags, false)
		s.log.Error("reload: the stack files do not load; watch keeps enforcing the applied stack",
			"errors", len(diags.Errs()), "diagnostics", strings.TrimSpace(b.String()))
		notes = append(notes, fmt.Sprintf("the stack files do not load (%d errors, see the log); watch keeps enforcing the applied stack", len(diags.Errs())))
		// The warnings were logged with the errors; once the files load,
		// the warnings left are logged again.
		s.reloadWarnings = ""
	default:
		if note := s.logReloadWarnings(files, diags); note != "" {
			notes = append(notes, note)
		}
		var applied *config.Stack
		if doc != nil {
			applied = doc.Stack
		}
		if diff := stackDiff(applied, st); len(diff) > 0 {
			msg := "the stack files differ from the applied stack (" + strings.Join(diff, ", ") + "); run `infrakit apply` to apply them"
			s.log.Warn("reload: " + msg)
			notes = append(notes, msg)
		} else {
			s.log.Info("reload: the stack files match the applied stack")
			notes = append(notes, "the stack files match the applied stack")
		}
	}
	s.rec.Event(status.Event{Kind: status.EventReload, Message: strings.Join(notes, "; ")})
}

// logReloadWarnings logs the warnings of stack files that load, unless
// the last reload logged the same ones, and returns the note for the
// reload event ("" without warnings).
func (s *service) logReloadWarnings(files map[string]*hcl.File, diags hcl.Diagnostics) string {
	var warnings hcl.Diagnostics
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning {
			warnings = append(warnings, d)
		}
	}
	text := ""
	if len(warnings) > 0 {
		var b bytes.Buffer
		_ = config.WriteDiagnostics(&b, files, warnings, false)
		text = strings.TrimSpace(b.String())
	}
	if text != "" && text != s.reloadWarnings {
		s.log.Warn("reload: the stack files load with warnings", "warnings", len(warnings), "diagnostics", text)
	}
	s.reloadWarnings = text
	switch len(warnings) {
	case 0:
		return ""
	case 1:
		return "the stack files load with 1 warning (logged when it first appeared)"
	}
	return fmt.Sprintf("the stack files load with %d warnings (logged when they first appeared)", len(warnings))
}

// replaceHost stops the providers and lets the next use launch them from
// the lock file as it is now. Subscriptions notice their stream ending and
// subscribe again through the new host.
func (s *service) replaceHost() {
	s.resetHost = false
	if err := s.runner.ResetHost(); err != nil {
		s.log.Warn("stopping the providers for the new lock file", "error", err)
	}
	s.prov.reset()
}

// stackDiff names the groups in which files differ from applied.
func stackDiff(applied, files *config.Stack) []string {
	var out []string
	if applied == nil {
		if files != nil && len(files.Groups) > 0 {
			out = append(out, "nothing is applied yet")
		}
		return out
	}
	if files == nil {
		return out
	}
	if applied.Name != files.Name {
		out = append(out, fmt.Sprintf("stack %q is now %q", applied.Name, files.Name))
	}
	for _, g := range files.Groups {
		switch a := applied.Group(g.Name); {
		case a == nil:
			out = append(out, fmt.Sprintf("group %q is new", g.Name))
		case configKey(a) != configKey(g):
			out = append(out, fmt.Sprintf("group %q changed", g.Name))
		}
	}
	for _, g := range applied.Groups {
		if files.Group(g.Name) == nil {
			out = append(out, fmt.Sprintf("group %q was removed", g.Name))
		}
	}
	return out
}

package command

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/config/legacy"
	"github.com/infrakit/infrakit/sdk/atomicfile"
)

// ExitFmtCheck is the exit status of `fmt -check` when a file is not
// formatted: 3, as `terraform fmt -check` uses, so scripts can tell "needs
// formatting" from an error (1).
const ExitFmtCheck = 3

// FmtCommand is `infrakit fmt [-check] [FILE|DIR]...`: it rewrites stack files
// in the canonical layout.
type FmtCommand struct {
	Meta
}

// Run formats the named files (every stack file of a named directory; by
// default of the working directory) and lists those it changed. With
// -check it changes nothing, lists the files that are not formatted and
// exits ExitFmtCheck if there are any.
func (c *FmtCommand) Run(args []string) int {
	fs := c.FlagSet("fmt")
	check := fs.Bool("check", false, "list unformatted files and exit 3 if any, without writing")
	extra := flagStackFiles(fs)
	targets, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(targets) == 0 {
		targets = []string{"."}
	}

	var files []string
	seen := map[string]bool{}
	add := func(path string) {
		if !seen[path] {
			seen[path] = true
			files = append(files, path)
		}
	}
	for _, t := range targets {
		path := c.Path(t)
		info, err := os.Stat(path)
		if err != nil {
			c.Ui.Error(fmt.Sprintf("Error: %s", err))
			return 1
		}
		if !info.IsDir() {
			if legacy.IsFile(path) {
				c.ShowDiagnostics(nil, hcl.Diagnostics{{
					Severity: hcl.DiagError,
					Summary:  "Not a stack language file",
					Detail: fmt.Sprintf("fmt formats the stack language (*.hcl); %s is a specification in an old format, "+
						"which fmt leaves as it is. \"infrakit convert %s\" prints it as HCL.", t, t),
				}})
				return 1
			}
			add(path)
			continue
		}
		names, err := config.StackFiles(path)
		if err != nil {
			c.Ui.Error(fmt.Sprintf("Error: %s", err))
			return 1
		}
		for _, n := range names {
			add(n)
		}
	}
	// -f adds stack files, as for every command. Specifications in the old
	// formats among them are part of the stack but not stack language:
	// there is nothing of them to format.
	for _, f := range *extra {
		if !legacy.IsFile(f) {
			add(c.Path(f))
		}
	}

	exit := 0
	parsed := map[string]*hcl.File{}
	var diags hcl.Diagnostics
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			c.Ui.Error(fmt.Sprintf("Error: %s", err))
			exit = 1
			continue
		}
		name := c.displayName(path)
		out, d := config.Format(src, name)
		if d.HasErrors() {
			// Source for the underlined line: the diagnostics name the file as shown.
			parsed[name] = &hcl.File{Bytes: src}
			diags = append(diags, d...)
			exit = 1
			continue
		}
		if bytes.Equal(out, src) {
			continue
		}
		c.Ui.Output(name)
		if *check {
			if exit == 0 {
				exit = ExitFmtCheck
			}
			continue
		}
		if err := replaceFile(path, out); err != nil {
			c.Ui.Error(fmt.Sprintf("Error: %s", err))
			exit = 1
		}
	}
	c.ShowDiagnostics(parsed, diags)
	return exit
}

// displayName is how a file is named to the user: relative to the working
// directory when it is inside it.
func (c *FmtCommand) displayName(path string) string {
	if rel, err := filepath.Rel(c.WorkDir, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// replaceFile writes data over path through a temporary file and a rename,
// keeping the file's mode, so an interrupted fmt never leaves a truncated
// stack file behind.
func replaceFile(path string, data []byte) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, info.Mode().Perm())
}

// Synopsis is the one-line description in `infrakit -help`.
func (c *FmtCommand) Synopsis() string {
	return "Rewrite stack files in the canonical format"
}

// Help is the text of `infrakit fmt -help`.
func (c *FmtCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] fmt [-check] [-f FILE]... [FILE|DIR]...

  Rewrites stack files in the canonical layout (indentation, aligned "="),
  in place, and lists the files it changed. With no arguments it formats
  the stack files of the working directory (its *.hcl files, not hidden
  ones such as .infrakit.lock.hcl); a directory argument means its stack
  files. A file with syntax errors is not touched; the errors are shown.

Options:

  -check   Change nothing: list the files that are not formatted, and exit
           with status 3 if there are any (as terraform fmt -check does).

  -f FILE  Format FILE too, beside the files of the arguments (by default
           the working directory's), as every command takes -f to add a
           stack file. Repeatable. A specification in an old format (*.json,
           *.yml, *.yaml) named with -f is left as it is: fmt formats the
           stack language only ("infrakit convert" prints one as HCL). Named
           as an argument, it is an error.

  Exit status: 0 when every file is (now) formatted, 3 with -check when some
  file is not, 1 on errors.
`)
}

package command

import (
	"flag"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
)

// Every command that reads the stack, or acts on objects of it, takes
// -f FILE (repeatable) to add a file to the working directory's: HCL, or a
// specification in an old format (legacy group JSON, new-schema YAML or
// JSON). A command calls flagStackFiles when it builds its flag set, and
// passes what was given to loadStack, or (resolved with stackFilePaths) to
// operation.Options.ExtraFiles.

// fileFlag collects repeated -f flags in order.
type fileFlag []string

func (f *fileFlag) String() string     { return strings.Join(*f, ",") }
func (f *fileFlag) Set(v string) error { *f = append(*f, v); return nil }

// flagStackFiles defines -f FILE, repeatable.
func flagStackFiles(fs *flag.FlagSet) *fileFlag {
	files := &fileFlag{}
	fs.Var(files, "f", "also read this stack file: HCL, or a JSON or YAML specification (repeatable)")
	return files
}

// stackFilePaths resolves -f files against the working directory, as every
// path is after -chdir.
func (m *Meta) stackFilePaths(files []string) []string {
	if len(files) == 0 {
		return nil
	}
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = m.ClientPath(f)
	}
	return out
}

// loadStack loads the working directory's stack with the -f files. The
// Stack is never nil; render the diagnostics with ShowDiagnostics(st.Files, diags).
func (m *Meta) loadStack(files []string) (*config.Stack, hcl.Diagnostics) {
	return config.LoadWith(m.stackDir(), m.inputs(), m.stackFilePaths(files)...)
}

package command

import (
	"flag"
	"fmt"
	"strings"

	"github.com/infrakit/infrakit/internal/config"
)

// Every command that loads the stack takes -var NAME=VALUE and -var-file
// FILE (both repeatable, applied in command-line order over the
// environment's INFRAKIT_VAR_NAME and the directory's variable files: see
// config.EnvVarPrefix). A command calls flagStackInputs instead of
// flagStackFiles; m.inputs() then gives what was set, for config.LoadWith
// or operation.Options.Inputs.

// varArgs is the -var and -var-file flags of one flag set, in order.
type varArgs struct{ list []config.VarArg }

type varFlag struct{ args *varArgs }

func (f varFlag) String() string { return "" }
func (f varFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("-var takes NAME=VALUE, like -var size=3; got %q", v)
	}
	f.args.list = append(f.args.list, config.VarArg{Name: strings.TrimSpace(name), Value: value})
	return nil
}

type varFileFlag struct{ args *varArgs }

func (f varFileFlag) String() string { return "" }
func (f varFileFlag) Set(v string) error {
	if v == "" {
		return fmt.Errorf("-var-file takes a file name")
	}
	f.args.list = append(f.args.list, config.VarArg{File: v})
	return nil
}

// flagStackInputs defines -f FILE, -var NAME=VALUE and -var-file FILE.
func flagStackInputs(fs *flag.FlagSet) *fileFlag {
	args := &varArgs{}
	fs.Var(varFlag{args}, "var", "set a variable: NAME=VALUE (repeatable)")
	fs.Var(varFileFlag{args}, "var-file", "read variable values from this file, HCL or JSON (repeatable)")
	return flagStackFiles(fs)
}

// inputs are the variable values the command was given: -var and -var-file
// of its flag set (files resolved against the working directory) and the
// environment.
func (m *Meta) inputs() config.Inputs {
	in := config.Inputs{Env: m.environ()}
	if m.flags == nil {
		return in
	}
	f := m.flags.Lookup("var")
	if f == nil {
		return in
	}
	vf, ok := f.Value.(varFlag)
	if !ok {
		return in
	}
	for _, a := range vf.args.list {
		if a.File != "" {
			a.File = m.ClientPath(a.File)
		}
		in.Args = append(in.Args, a)
	}
	return in
}

// hasVarFlags reports whether -var or -var-file was given.
func (m *Meta) hasVarFlags() bool {
	return len(m.inputs().Args) > 0
}

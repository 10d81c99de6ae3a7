// Package command holds infrakit's CLI verbs, one file per verb, and the Meta
// they share. A command parses its flags (Meta.FlagSet, ParseArgs), calls into
// internal/ and renders the result; it decides nothing itself.
//
// Adding a command: write <verb>.go with a type that embeds Meta and
// implements cli.Command (Help, Synopsis, Run), then add one line to the table
// in Commands. Nested verbs use a space in the key ("group ls"); give the
// family a parent entry ("group") whose Run returns cli.RunResultHelp, so
// `infrakit -help` lists it with a synopsis. Run returns 0 on success, 1 on
// error, and cli.RunResultHelp after a flag error so the usage is printed.
//
// Tests of package command share newTestMeta (meta_test.go) and its TestMain,
// which runs goleak.
package command

import "github.com/mitchellh/cli"

// Commands is the command table main runs: verb -> factory. Every command
// gets its own copy of meta, shell completion of its flags and arguments,
// and runs against a remote watch when meta.Address says so (remote.go).
func Commands(meta Meta) map[string]cli.CommandFactory {
	return withCompletion(meta, withRemote(meta, commandTable(meta)))
}

// commandTable is the table itself.
func commandTable(meta Meta) map[string]cli.CommandFactory {
	return map[string]cli.CommandFactory{
		// One line per verb, kept in alphabetical order.
		"apply":                   func() (cli.Command, error) { return &ApplyCommand{Meta: meta}, nil },
		"convert":                 func() (cli.Command, error) { return &ConvertCommand{Meta: meta}, nil },
		"destroy":                 func() (cli.Command, error) { return &DestroyCommand{Meta: meta}, nil },
		"enrollment":              func() (cli.Command, error) { return &EnrollmentCommand{Meta: meta}, nil },
		"enrollment describe":     func() (cli.Command, error) { return &EnrollmentDescribeCommand{Meta: meta}, nil },
		"enrollment destroy":      func() (cli.Command, error) { return &EnrollmentDestroyCommand{Meta: meta}, nil },
		"enrollment free":         func() (cli.Command, error) { return &EnrollmentFreeCommand{Meta: meta}, nil },
		"fmt":                     func() (cli.Command, error) { return &FmtCommand{Meta: meta}, nil },
		"force-unlock":            func() (cli.Command, error) { return &ForceUnlockCommand{Meta: meta}, nil },
		"graph":                   func() (cli.Command, error) { return &GraphCommand{Meta: meta}, nil },
		"group":                   func() (cli.Command, error) { return &GroupCommand{Meta: meta}, nil },
		"group describe":          func() (cli.Command, error) { return &GroupDescribeCommand{Meta: meta}, nil },
		"group destroy":           func() (cli.Command, error) { return &GroupDestroyCommand{Meta: meta}, nil },
		"group destroy-instances": func() (cli.Command, error) { return &GroupDestroyInstancesCommand{Meta: meta}, nil },
		"group free":              func() (cli.Command, error) { return &GroupFreeCommand{Meta: meta}, nil },
		"group ls":                func() (cli.Command, error) { return &GroupListCommand{Meta: meta}, nil },
		"group scale":             func() (cli.Command, error) { return &GroupScaleCommand{Meta: meta}, nil },
		"group stop-update":       func() (cli.Command, error) { return &GroupStopUpdateCommand{Meta: meta}, nil },
		"import":                  func() (cli.Command, error) { return &ImportCommand{Meta: meta}, nil },
		"ingress":                 func() (cli.Command, error) { return &IngressCommand{Meta: meta}, nil },
		"ingress describe":        func() (cli.Command, error) { return &IngressDescribeCommand{Meta: meta}, nil },
		"ingress destroy":         func() (cli.Command, error) { return &IngressDestroyCommand{Meta: meta}, nil },
		"ingress free":            func() (cli.Command, error) { return &IngressFreeCommand{Meta: meta}, nil },
		"init":                    func() (cli.Command, error) { return &InitCommand{Meta: meta}, nil },
		"lb":                      func() (cli.Command, error) { return &LBCommand{Meta: meta}, nil },
		"lb backends":             func() (cli.Command, error) { return &LBBackendsCommand{Meta: meta}, nil },
		"lb backends ls":          func() (cli.Command, error) { return &LBBackendsListCommand{Meta: meta}, nil },
		"lb routes":               func() (cli.Command, error) { return &LBRoutesCommand{Meta: meta}, nil },
		"lb routes ls":            func() (cli.Command, error) { return &LBRoutesListCommand{Meta: meta}, nil },
		"plan":                    func() (cli.Command, error) { return &PlanCommand{Meta: meta}, nil },
		"plugins":                 func() (cli.Command, error) { return &PluginsCommand{Meta: meta}, nil },
		"plugins install":         func() (cli.Command, error) { return &PluginsInstallCommand{Meta: meta}, nil },
		"plugins ls":              func() (cli.Command, error) { return &PluginsListCommand{Meta: meta}, nil },
		"plugins rm":              func() (cli.Command, error) { return &PluginsRemoveCommand{Meta: meta}, nil },
		"output":                  func() (cli.Command, error) { return &OutputCommand{Meta: meta}, nil },
		"console":                 func() (cli.Command, error) { return &ConsoleCommand{Meta: meta}, nil },
		"show":                    func() (cli.Command, error) { return &ShowCommand{Meta: meta}, nil },
		"state":                   func() (cli.Command, error) { return &StateCommand{Meta: meta}, nil },
		"state list":              func() (cli.Command, error) { return &StateListCommand{Meta: meta}, nil },
		"state mv":                func() (cli.Command, error) { return &StateMoveCommand{Meta: meta}, nil },
		"state rm":                func() (cli.Command, error) { return &StateRemoveCommand{Meta: meta}, nil },
		"state show":              func() (cli.Command, error) { return &StateShowCommand{Meta: meta}, nil },
		"validate":                func() (cli.Command, error) { return &ValidateCommand{Meta: meta}, nil },
		"version":                 func() (cli.Command, error) { return &VersionCommand{Meta: meta}, nil },
		"watch":                   func() (cli.Command, error) { return &WatchCommand{Meta: meta}, nil },
	}
}

package cli

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
)

// parseFlags parses args into fs with the flags moved before the positional
// arguments: Go's flag package stops at the first positional argument, and
// operators write `show ID -json` as often as `show -json ID`. It knows from
// fs which flags take a value, so `vlan add hall-a 0 -node n1 -iface eth0`
// keeps n1 with -node. A negative number is an argument, not a flag; "--"
// ends the flags. Every verb parses its flags here.
func parseFlags(fs *flag.FlagSet, args []string) error {
	return fs.Parse(flagsFirst(fs, args))
}

// flagsFirst is the reordering parseFlags does: the flags, "--", then the
// positional arguments in their order.
func flagsFirst(fs *flag.FlagSet, args []string) []string {
	takesValue := func(name string) bool {
		f := fs.Lookup(name)
		if f == nil {
			return false
		}
		b, ok := f.Value.(interface{ IsBoolFlag() bool })
		return !ok || !b.IsBoolFlag()
	}
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i+1:]...)
			break
		}
		if _, err := strconv.Atoi(a); err == nil || !strings.HasPrefix(a, "-") || a == "-" {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasValue && takesValue(name) && i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	return append(append(flags, "--"), rest...)
}

// verbFlags is one verb's flag set and its usage line, for the error when
// its positional arguments are not the ones it takes.
type verbFlags struct {
	*flag.FlagSet
	usage string
}

func newFlags(name, usage string) verbFlags {
	return verbFlags{flag.NewFlagSet(name, flag.ContinueOnError), usage}
}

// anyArgs is the nargs of a verb that leaves its positional arguments to
// itself.
const anyArgs = -1

// client parses args with the client's -data (newClient) and checks that
// nargs positional arguments remain.
func (fs verbFlags) client(args []string, nargs int) (*client, error) {
	c, err := newClient(fs.FlagSet, args)
	if err != nil {
		return nil, err
	}
	if nargs != anyArgs && fs.NArg() != nargs {
		return nil, errors.New("usage: " + fs.usage)
	}
	return c, nil
}

// noArgs refuses positional arguments, for verbs that take only flags.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return nil
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// keyValues collects repeated key=value flags.
type keyValues map[string]string

func (kv keyValues) String() string { return fmt.Sprint(map[string]string(kv)) }
func (kv keyValues) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", s)
	}
	kv[k] = v
	return nil
}

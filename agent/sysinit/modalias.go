package sysinit

import (
	"bufio"
	"fmt"
	"sort"
	"strings"
)

// Alias is one line of modules.alias: a device modalias pattern (a shell
// glob, as the kernel's MODULE_DEVICE_TABLE writes it) and the module that
// drives a device matching it.
type Alias struct {
	Pattern string
	Module  string
}

// maxAliases bounds a modules.alias file: Debian's whole kernel has about
// 35,000 lines.
const maxAliases = 200_000

// ParseAliases reads modules.alias ("alias PATTERN MODULE" lines; blank
// lines and # comments skipped).
func ParseAliases(text string) ([]Alias, error) {
	var out []Alias
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "alias" {
			return nil, fmt.Errorf("modules.alias line %d: want \"alias PATTERN MODULE\", got %q", n, line)
		}
		if len(out) == maxAliases {
			return nil, fmt.Errorf("modules.alias: more than %d lines", maxAliases)
		}
		out = append(out, Alias{Pattern: f[1], Module: strings.ReplaceAll(f[2], "-", "_")})
	}
	return out, sc.Err()
}

// ModulesFor names the modules (sorted, once each) whose alias patterns
// match any of the devices' modaliases: what modprobe would load for them.
func ModulesFor(aliases []Alias, modaliases []string) []string {
	seen := map[string]bool{}
	for _, m := range modaliases {
		for _, a := range aliases {
			if !seen[a.Module] && Glob(a.Pattern, m) {
				seen[a.Module] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// Glob reports whether s matches pattern as fnmatch(3) without flags
// does, which is how kmod matches modaliases: * any run of characters, ?
// one character, [set] and [!set] one character of (or not of) a set
// with ranges. A malformed set matches its '[' literally.
func Glob(pattern, s string) bool {
	// The classic iterative matcher: remember the last star and retry
	// from there, which keeps it linear in practice and never recursive.
	px, sx := 0, 0
	starP, starS := -1, 0
	for sx < len(s) {
		if px < len(pattern) {
			switch c := pattern[px]; c {
			case '*':
				starP, starS = px, sx
				px++
				continue
			case '?':
				px++
				sx++
				continue
			case '[':
				if ok, next, valid := matchSet(pattern, px, s[sx]); valid {
					if ok {
						px, sx = next, sx+1
						continue
					}
				} else if s[sx] == '[' {
					px, sx = px+1, sx+1
					continue
				}
			default:
				if c == s[sx] {
					px++
					sx++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		px, sx = starP+1, starS
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}

// matchSet matches c against the set starting at pattern[at] == '['. It
// returns whether c is in the set, the index after the set, and whether
// the set was well formed (closed by ']').
func matchSet(pattern string, at int, c byte) (ok bool, next int, valid bool) {
	i := at + 1
	negate := false
	if i < len(pattern) && (pattern[i] == '!' || pattern[i] == '^') {
		negate, i = true, i+1
	}
	first := true
	for i < len(pattern) {
		if pattern[i] == ']' && !first {
			return ok != negate, i + 1, true
		}
		first = false
		lo := pattern[i]
		hi := lo
		if i+2 < len(pattern) && pattern[i+1] == '-' && pattern[i+2] != ']' {
			hi = pattern[i+2]
			i += 2
		}
		if lo <= c && c <= hi {
			ok = true
		}
		i++
	}
	return false, 0, false
}

// closureOrder returns the modules named (by kernel name) and everything
// they depend on, dependencies first, as paths from modules.dep; names
// that are not modules there are left out (built in, or not shipped).
func closureOrder(dep string, names []string) ([]string, error) {
	order, err := LoadOrder(dep)
	if err != nil {
		return nil, err
	}
	deps := map[string][]string{}
	byName := map[string]string{}
	for _, line := range strings.Split(dep, "\n") {
		mod, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok {
			deps[mod] = strings.Fields(rest)
			byName[ModuleName(mod)] = mod
		}
	}
	want := map[string]bool{}
	var add func(string)
	add = func(m string) {
		if want[m] {
			return
		}
		want[m] = true
		for _, d := range deps[m] {
			add(d)
		}
	}
	for _, n := range names {
		if m, ok := byName[strings.ReplaceAll(n, "-", "_")]; ok {
			add(m)
		}
	}
	var out []string
	for _, m := range order {
		if want[m] {
			out = append(out, m)
		}
	}
	return out, nil
}

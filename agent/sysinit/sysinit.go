// Package sysinit is what the agent does as PID 1 of the commissioning
// image before and after its work: mount the kernel's file systems, load
// the kernel modules the image carries, bring the NICs up with DHCP, and in
// the end power the machine off. There is no other init, no shell and no
// udev: devtmpfs creates the device nodes.
package sysinit

import (
	"bufio"
	"fmt"
	"path"
	"sort"
	"strings"
)

// LoadOrder reads a modules.dep file ("kernel/a.ko: kernel/b.ko
// kernel/c.ko") and returns every module with its dependencies before it.
// modules.dep lists a module's dependencies closest first, so they are
// loaded from the end of the list; a module is loaded once.
func LoadOrder(dep string) ([]string, error) {
	deps := map[string][]string{}
	var names []string
	sc := bufio.NewScanner(strings.NewReader(dep))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		mod, rest, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("modules.dep: line %q has no colon", line)
		}
		deps[mod] = strings.Fields(rest)
		names = append(names, mod)
	}
	sort.Strings(names)
	var out []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(m string, chain []string) error
	visit = func(m string, chain []string) error {
		switch state[m] {
		case 1:
			return fmt.Errorf("modules.dep: dependency cycle %s → %s", strings.Join(chain, " → "), m)
		case 2:
			return nil
		}
		state[m] = 1
		d := deps[m]
		for i := len(d) - 1; i >= 0; i-- {
			if err := visit(d[i], append(chain, m)); err != nil {
				return err
			}
		}
		state[m] = 2
		out = append(out, m)
		return nil
	}
	for _, m := range names {
		if err := visit(m, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ModuleName is a module's name as the kernel knows it: the file's base
// name without .ko[.xz|.zst|.gz], dashes as underscores.
func ModuleName(file string) string {
	b := path.Base(file)
	if i := strings.Index(b, ".ko"); i >= 0 {
		b = b[:i]
	}
	return strings.ReplaceAll(b, "-", "_")
}

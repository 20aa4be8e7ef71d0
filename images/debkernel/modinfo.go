package debkernel

import (
	"bytes"
	"debug/elf"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// ModInfo reads a module's .modinfo section: each key ("alias",
// "firmware", "depends", "license", …) with its values in the order the
// module lists them.
func ModInfo(file string) (map[string][]string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]string{}
	sec := f.Section(".modinfo")
	if sec == nil {
		return out, nil
	}
	data, err := sec.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		k, v, ok := bytes.Cut(kv, []byte("="))
		if ok {
			out[string(k)] = append(out[string(k)], string(v))
		}
	}
	return out, nil
}

// ModulesAlias writes modules.alias ("alias PATTERN NAME" lines, as
// depmod writes them) for the given modules (paths relative to dir), from
// the alias entries of their .modinfo: what an init matches each device's
// modalias against to load drivers for the hardware present. It also
// returns, per module, the firmware files the module names.
func ModulesAlias(dir string, files []string) (alias string, firmware map[string][]string, err error) {
	var lines []string
	firmware = map[string][]string{}
	for _, rel := range files {
		info, err := ModInfo(filepath.Join(dir, rel))
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", rel, err)
		}
		name := moduleName(rel)
		for _, a := range info["alias"] {
			lines = append(lines, "alias "+a+" "+name)
		}
		if fw := info["firmware"]; len(fw) > 0 {
			firmware[rel] = fw
		}
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		return "", firmware, nil
	}
	return strings.Join(lines, "\n") + "\n", firmware, nil
}

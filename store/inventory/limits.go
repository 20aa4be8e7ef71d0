package inventory

import (
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on every field of a report, from the fleet simulator's largest
// machines (lab/fleet: 72 KB of JSON, 224 PCI functions, 175 CPU flags, 40
// disks, 32 DIMMs, 8 GPUs, 4 HCAs, strings up to 73 bytes) with room to
// spare for bigger real ones (a 100-drive JBOD head, SR-IOV NICs with many
// functions, 16-socket machines). A list not named here may hold
// defaultMaxItems; a string, MaxField bytes. A new field is bounded the day
// it is added, without anyone remembering to.
const (
	// MaxDocument bounds the whole document: the request body and the
	// decoded size (strings plus a word per value) alike.
	MaxDocument = 1 << 20
	// MaxField bounds one string an agent sends (an error message may be
	// maxErrorText).
	MaxField        = 256
	maxErrorText    = 1024
	defaultMaxItems = 64
)

// maxItemsAt is the largest number of entries each list may hold, by JSON
// path ([] marks the entries of a list).
var maxItemsAt = map[string]int{
	"dimms":                   512,
	"cpus":                    64,
	"cpus[].flags":            512,
	"disks":                   1024,
	"nvme":                    256,
	"nvme[].namespaces":       128,
	"nics":                    512,
	"nics[].ips":              64,
	"infiniband":              64,
	"infiniband[].ports":      8,
	"gpus":                    64,
	"pci":                     4096,
	"lldp":                    512,
	"errors":                  256,
	"bmc.errors":              32,
	"memory.numa_nodes_bytes": 64,
}

// multiline names the strings that may hold newlines and tabs: collectors'
// error text. Every other string is one line of printable text.
var multiline = map[string]bool{"errors[].error": true, "bmc.errors[]": true}

// CheckLimits walks a report and returns the first field past its limit, by
// JSON path. Nothing an agent sends is stored unbounded.
func CheckLimits(r *Report) error {
	var cost int
	return walkLimits(reflect.ValueOf(r).Elem(), "", &cost)
}

func walkLimits(v reflect.Value, path string, cost *int) error {
	*cost += 8
	if *cost > MaxDocument {
		return fmt.Errorf("report is larger than the %d bytes allowed once decoded", MaxDocument)
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return walkLimits(v.Elem(), path, cost)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if path != "" {
				name = path + "." + name
			}
			if err := walkLimits(v.Field(i), name, cost); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Map:
		limit, ok := maxItemsAt[path]
		if !ok {
			limit = defaultMaxItems
		}
		if v.Len() > limit {
			return fmt.Errorf("%s: %d entries is more than the %d allowed", path, v.Len(), limit)
		}
		if v.Kind() == reflect.Map {
			it := v.MapRange()
			for it.Next() {
				if err := walkLimits(it.Key(), path+"{}", cost); err != nil {
					return err
				}
				if err := walkLimits(it.Value(), path+"{}", cost); err != nil {
					return err
				}
			}
			return nil
		}
		for i := range v.Len() {
			if err := walkLimits(v.Index(i), path+"[]", cost); err != nil {
				return err
			}
		}
	case reflect.String:
		s := v.String()
		*cost += len(s)
		return CheckText(path, s, multiline[path])
	}
	return nil
}

// CheckText is the rule for one string from an agent: at most MaxField
// bytes (maxErrorText for multi-line error text), valid UTF-8, and no
// control characters (newlines and tabs allowed when multi is true), so that
// nothing an agent sends can rewrite a terminal or a log line.
func CheckText(name, s string, multi bool) error {
	limit := MaxField
	if multi {
		limit = maxErrorText
	}
	if len(s) > limit {
		return fmt.Errorf("%s: longer than %d bytes", name, limit)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s: invalid UTF-8", name)
	}
	if i := strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsControl(r) && !(multi && (r == '\n' || r == '\t'))
	}); i >= 0 {
		return fmt.Errorf("%s: control character at byte %d", name, i)
	}
	return nil
}

package overlay

import (
	"strings"
	"text/template"
)

// funcs are the functions templates may call besides text/template's own
// (and, or, not, len, index, printf, eq, lt…): string helpers and integer
// arithmetic. None loops or allocates more than its arguments.
var funcs = template.FuncMap{
	"join":      func(sep string, s []string) string { return strings.Join(s, sep) },
	"split":     func(sep, s string) []string { return strings.Split(s, sep) },
	"lower":     strings.ToLower,
	"upper":     strings.ToUpper,
	"trim":      strings.TrimSpace,
	"replace":   func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
	"contains":  func(sub, s string) bool { return strings.Contains(s, sub) },
	"hasPrefix": func(prefix, s string) bool { return strings.HasPrefix(s, prefix) },
	"hasSuffix": func(suffix, s string) bool { return strings.HasSuffix(s, suffix) },
	"default": func(def string, v any) any {
		if s, ok := v.(string); ok && s == "" || v == nil {
			return def
		}
		return v
	},
	"add": func(a, b any) int64 { return toInt(a) + toInt(b) },
	"sub": func(a, b any) int64 { return toInt(a) - toInt(b) },
	"mul": func(a, b any) int64 { return toInt(a) * toInt(b) },
	"div": func(a, b any) int64 {
		if toInt(b) == 0 {
			return 0
		}
		return toInt(a) / toInt(b)
	},
	"gresType": GRESType,
	stepFunc:   step,
	// hasTag reports whether a node carries a tag: {{ if hasTag "gpu" .Node }}.
	"hasTag": func(tag string, n Node) bool {
		for _, t := range n.Tags {
			if t == tag {
				return true
			}
		}
		return false
	},
}

// toInt reads the integers templates hold (int and int64 fields,
// constants); anything else is 0.
func toInt(v any) int64 {
	switch v := v.(type) {
	case int:
		return int64(v)
	case int64:
		return v
	case int32:
		return int64(v)
	case uint64:
		return int64(v)
	case uint32:
		return int64(v)
	}
	return 0
}

package tagrule

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
)

// Evaluator runs rules over one Node at a time, each evaluation with its
// own step budget. Making one clones each rule's template once (binding
// its functions to the evaluator), so a fleet is walked with one
// evaluator; it is not safe for concurrent use (make one per goroutine).
type Evaluator struct {
	tmpls []*template.Template
	st    evalState
	out   limitedBuffer
}

// evalState is what the functions bound to an evaluator see: the Node
// being evaluated and the steps it has taken.
type evalState struct {
	node  *Node
	steps int
}

var errBudget = fmt.Errorf("the rule takes more than %d steps (each turn of a range is one, each element has, pciVendor or pciDevice looks at one more)", MaxSteps)

var errOutput = fmt.Errorf("the rule prints more than %d bytes: it must print true or false", MaxOutput)

func (st *evalState) spend(n int) error {
	st.steps += n
	if st.steps > MaxSteps {
		return errBudget
	}
	return nil
}

func (st *evalState) funcs() template.FuncMap {
	return template.FuncMap{
		stepFunc: func() (string, error) { return "", st.spend(1) },
		"has": func(list []string, v string) (bool, error) {
			if err := st.spend(1 + len(list)); err != nil {
				return false, err
			}
			return slices.Contains(list, v), nil
		},
		"contains": func(s, sub string) (bool, error) { return strings.Contains(s, sub), st.spend(1) },
		"hasPrefix": func(s, prefix string) (bool, error) {
			return strings.HasPrefix(s, prefix), st.spend(1)
		},
		"hasSuffix": func(s, suffix string) (bool, error) {
			return strings.HasSuffix(s, suffix), st.spend(1)
		},
		"lower": func(s string) (string, error) { return strings.ToLower(s), st.spend(1) },
		"pciVendor": func(id string) (bool, error) {
			return st.pci(id, false, (*Node).PCIVendors)
		},
		"pciDevice": func(id string) (bool, error) {
			return st.pci(id, true, (*Node).PCIDevices)
		},
	}
}

func (st *evalState) pci(id string, device bool, list func(*Node) ([]string, error)) (bool, error) {
	want, err := pciID(id, device)
	if err != nil {
		return false, err
	}
	ids, err := list(st.node)
	if err != nil {
		return false, err
	}
	if err := st.spend(1 + len(ids)); err != nil {
		return false, err
	}
	return slices.Contains(ids, want), nil
}

// NewEvaluator prepares rules for evaluation; Eval names them by their
// position here.
func NewEvaluator(rules ...*Rule) *Evaluator {
	e := &Evaluator{}
	e.out.max = MaxOutput
	funcs := e.st.funcs()
	for _, r := range rules {
		t, err := r.tmpl.Clone()
		if err != nil {
			panic("tagrule: clone a parsed rule: " + err.Error()) // Clone fails only on a template already executed with html escaping
		}
		e.tmpls = append(e.tmpls, t.Funcs(funcs))
	}
	return e
}

// data is the rule's dot.
type data struct{ Node *Node }

// Eval evaluates rule i (as given to NewEvaluator) over n. A failure is
// an *Error: where in the rule, and why.
func (e *Evaluator) Eval(i int, n *Node) (bool, error) {
	e.st = evalState{node: n}
	e.out.Reset()
	err := e.tmpls[i].Execute(&e.out, data{Node: n})
	switch {
	case errors.Is(err, errBudget):
		// Where: the range (or the call) that spent the last step.
		e := &Error{Msg: errBudget.Error()}
		if pe, ok := execError(err).(*Error); ok {
			e.Line, e.Col = pe.Line, pe.Col
		}
		return false, e
	case errors.Is(err, errOutput):
		return false, &Error{Msg: errOutput.Error()}
	case err != nil:
		return false, execError(err)
	}
	switch out := strings.TrimSpace(e.out.String()); out {
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		return false, &Error{Msg: fmt.Sprintf("the rule printed %q, not true or false", out)}
	}
}

// Match evaluates one rule over one Node (a fleet is walked with one
// Evaluator instead).
func (r *Rule) Match(n *Node) (bool, error) { return NewEvaluator(r).Eval(0, n) }

var execErrPattern = regexp.MustCompile(`^template: ` + ruleName + `:(\d+):(\d+): executing "` + ruleName + `" at (<.*>): (.*)$`)

// execError turns text/template's error into an *Error with the place.
func execError(err error) error {
	msg := err.Error()
	m := execErrPattern.FindStringSubmatch(msg)
	if m == nil {
		return &Error{Msg: strings.TrimPrefix(msg, "template: ")}
	}
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	// text/template counts the column in bytes from 0; Error counts
	// characters from 1 (rules are short: count from the text).
	return &Error{Line: line, Col: col + 1, Msg: m[3] + ": " + m[4]}
}

// limitedBuffer is a buffer that refuses to grow past max.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, errOutput
	}
	return b.Buffer.Write(p)
}

package tagrule

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode/utf8"

	"github.com/rollcall/rollcall/store"
)

// Bounds of a rule (see the package doc for why an evaluation is bounded).
const (
	// MaxRule bounds a rule's text: the store's bound on Tag.Match.
	MaxRule = store.MaxMatch
	// MaxOutput bounds what an evaluation prints: "true" or "false" with
	// some white space around it.
	MaxOutput = 64
	// MaxSteps bounds an evaluation: turns of a range plus the elements
	// has, pciVendor and pciDevice look at. The longest list a Node holds
	// from a real report is a few hundred PCI ids; a range over it with a
	// has inside stays far below.
	MaxSteps = 10_000
)

// ruleName is the template's name; errors say "rule:LINE:COL".
const ruleName = "rule"

// stepFunc is called at the start of every turn of a range. No rule can
// name it: the checker allows only Funcs and the built-ins.
const stepFunc = "_step"

// Funcs are the functions a rule may call beyond text/template's built-ins
// and, or, not, eq, ne, lt, le, gt, ge, len and index.
var Funcs = []string{"contains", "has", "hasPrefix", "hasSuffix", "lower", "pciDevice", "pciVendor"}

var builtins = []string{"and", "eq", "ge", "gt", "index", "le", "len", "lt", "ne", "not", "or"}

// Rule is a parsed match rule. It is never executed itself: an Evaluator
// binds it to its own step budget. Safe for concurrent use.
type Rule struct {
	text string
	tmpl *template.Template
}

// Text is the rule as it was written.
func (r *Rule) Text() string { return r.text }

// Error is a rule refused by Parse, or an evaluation that failed: where,
// and why. Line and Col count from 1 (Col in characters); 0 when the
// place is not known.
type Error struct {
	Line, Col int
	Msg       string
}

func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Col > 0:
		return fmt.Sprintf("rule line %d, column %d: %s", e.Line, e.Col, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("rule line %d: %s", e.Line, e.Msg)
	}
	return "rule: " + e.Msg
}

// Parse parses and checks a rule. A refusal is an *Error with the line
// and column of what it refuses.
func Parse(text string) (*Rule, error) {
	if len(text) > MaxRule {
		return nil, &Error{Msg: fmt.Sprintf("%d bytes is more than the %d a rule may have", len(text), MaxRule)}
	}
	if !utf8.ValidString(text) {
		return nil, &Error{Msg: "not UTF-8 text"}
	}
	tree, err := parseTree(text)
	if err != nil {
		return nil, err
	}
	if parse.IsEmptyTree(tree.Root) {
		return nil, &Error{Line: 1, Col: 1, Msg: "the rule is empty: it must print true or false, as {{ gt .Node.GPUs 0 }} does"}
	}
	c := &checker{text: text, tree: tree}
	c.list(tree.Root, true)
	if c.err != nil {
		return nil, c.err
	}
	tmpl, err := template.New(ruleName).AddParseTree(ruleName, tree)
	if err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	return &Rule{text: text, tmpl: tmpl}, nil
}

var parseErrPattern = regexp.MustCompile(`^template: ` + ruleName + `:(\d+): (.*)$`)

// parseTree runs text/template's parser, without its function check (the
// checker does that, with the place). text/template says only the line of
// a syntax error; the column is where the shortest prefix of the text that
// fails the same way ends, which is where the parser stopped.
func parseTree(text string) (*parse.Tree, error) {
	tree, err := rawParse(text)
	if err == nil {
		return tree, nil
	}
	if e, ok := err.(*Error); ok {
		return nil, e
	}
	m := parseErrPattern.FindStringSubmatch(err.Error())
	if m == nil {
		return nil, &Error{Msg: strings.TrimPrefix(err.Error(), "template: ")}
	}
	line, _ := strconv.Atoi(m[1])
	e := &Error{Line: line, Msg: m[2]}
	start := lineStart(text, line)
	end := len(text)
	if i := strings.IndexByte(text[start:], '\n'); i >= 0 {
		end = start + i
	}
	for p := start; p <= end; p++ {
		if _, perr := rawParse(text[:p]); perr != nil && perr.Error() == err.Error() {
			e.Col = max(utf8.RuneCountInString(text[start:p]), 1)
			break
		}
	}
	return nil, e
}

func rawParse(text string) (*parse.Tree, error) {
	tree := parse.New(ruleName)
	tree.Mode = parse.SkipFuncCheck
	set := map[string]*parse.Tree{}
	if _, err := tree.Parse(text, "", "", set); err != nil {
		return nil, err
	}
	for name, t := range set {
		if name != ruleName {
			line, col := place(text, t.Root.Position())
			return nil, &Error{Line: line, Col: col, Msg: fmt.Sprintf("a rule defines no templates (define %q)", name)}
		}
	}
	return tree, nil
}

func lineStart(text string, line int) int {
	p := 0
	for l := 1; l < line; l++ {
		i := strings.IndexByte(text[p:], '\n')
		if i < 0 {
			return len(text)
		}
		p += i + 1
	}
	return p
}

// place gives the line and column of a byte offset.
func place(text string, pos parse.Pos) (line, col int) {
	p := min(int(pos), len(text))
	line = 1 + strings.Count(text[:p], "\n")
	start := strings.LastIndexByte(text[:p], '\n') + 1
	return line, utf8.RuneCountInString(text[start:p]) + 1
}

// nodeNames are the fields and methods a rule may name after .Node.
var nodeNames = func() []string {
	var out []string
	t := reflect.TypeFor[Node]()
	for _, f := range reflect.VisibleFields(t) {
		if f.IsExported() {
			out = append(out, f.Name)
		}
	}
	pt := reflect.TypeFor[*Node]()
	for i := range pt.NumMethod() {
		out = append(out, pt.Method(i).Name)
	}
	slices.Sort(out)
	return out
}()

// checker walks a parsed rule, refuses what a rule may not use, and puts
// a step at the start of every range turn.
type checker struct {
	text string
	tree *parse.Tree
	err  *Error
}

func (c *checker) fail(n parse.Node, format string, a ...any) { c.failAt(n.Position(), format, a...) }

// list checks a list of nodes; root says whether dot is still the rule's
// data (outside with and range), where .Node's fields can be checked.
func (c *checker) list(l *parse.ListNode, root bool) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		c.node(n, root)
	}
}

func (c *checker) node(n parse.Node, root bool) {
	switch n := n.(type) {
	case *parse.TextNode, *parse.CommentNode, *parse.BreakNode, *parse.ContinueNode:
	case *parse.ActionNode:
		c.pipe(n.Pipe, root)
	case *parse.IfNode:
		c.pipe(n.Pipe, root)
		c.list(n.List, root)
		c.list(n.ElseList, root)
	case *parse.WithNode:
		c.pipe(n.Pipe, root)
		c.list(n.List, false)
		c.list(n.ElseList, root)
	case *parse.RangeNode:
		c.pipe(n.Pipe, root)
		c.list(n.List, false)
		c.list(n.ElseList, root)
		if n.List == nil { // the parser always makes one; the budget must not rest on it
			n.List = &parse.ListNode{NodeType: parse.NodeList, Pos: n.Pos}
		}
		n.List.Nodes = append([]parse.Node{c.step(n)}, n.List.Nodes...)
	case *parse.TemplateNode:
		// The node stands at its name; point at the keyword.
		pos := n.Position()
		if i := strings.LastIndex(c.text[:min(int(pos), len(c.text))], "template"); i >= 0 {
			pos = parse.Pos(i)
		}
		c.failAt(pos, "a rule calls no templates ({{template %q}})", n.Name)
	default:
		c.fail(n, "%s is not allowed in a rule", n)
	}
}

// step is the action {{_step}} at the place of a range.
func (c *checker) step(r *parse.RangeNode) parse.Node {
	id := parse.NewIdentifier(stepFunc).SetTree(c.tree).SetPos(r.Pos)
	cmd := &parse.CommandNode{NodeType: parse.NodeCommand, Pos: r.Pos, Args: []parse.Node{id}}
	pipe := &parse.PipeNode{NodeType: parse.NodePipe, Pos: r.Pos, Line: r.Line, Cmds: []*parse.CommandNode{cmd}}
	return &parse.ActionNode{NodeType: parse.NodeAction, Pos: r.Pos, Line: r.Line, Pipe: pipe}
}

func (c *checker) pipe(p *parse.PipeNode, root bool) {
	if p == nil {
		return
	}
	for _, cmd := range p.Cmds {
		for i, a := range cmd.Args {
			c.arg(a, root)
			if id, ok := a.(*parse.IdentifierNode); ok && i == 0 && len(cmd.Args) > 1 {
				c.literalArg(id.Ident, cmd.Args[1])
			}
		}
	}
}

func (c *checker) arg(a parse.Node, root bool) {
	switch a := a.(type) {
	case *parse.IdentifierNode:
		if !slices.Contains(builtins, a.Ident) && !slices.Contains(Funcs, a.Ident) {
			c.fail(a, "function %q is not allowed in a rule (allowed: %s)", a.Ident, strings.Join(slices.Sorted(slices.Values(append(slices.Clone(builtins), Funcs...))), ", "))
		}
	case *parse.FieldNode:
		if root {
			c.chain(a, a.Ident)
		}
	case *parse.VariableNode:
		if a.Ident[0] == "$" && len(a.Ident) > 1 {
			c.chain(a, a.Ident[1:])
		}
	case *parse.ChainNode:
		c.arg(a.Node, root)
	case *parse.PipeNode:
		c.pipe(a, root)
	case *parse.DotNode, *parse.NilNode, *parse.BoolNode, *parse.NumberNode, *parse.StringNode:
	default:
		c.fail(a, "%s is not allowed in a rule", a)
	}
}

// chain checks .Node.X against Node's fields and methods.
func (c *checker) chain(n parse.Node, ident []string) {
	if ident[0] != "Node" {
		c.failAt(c.fieldPos(n, ident[0]), "a rule sees only .Node, not .%s", ident[0])
		return
	}
	if len(ident) > 1 && !slices.Contains(nodeNames, ident[1]) {
		c.failAt(c.fieldPos(n, ident[1]), ".Node has no %s (it has %s)", ident[1], strings.Join(nodeNames, ", "))
	}
}

// fieldPos is where .name stands in a field chain: the parser places a
// chain at its second element, so look from there on, then before it.
func (c *checker) fieldPos(n parse.Node, name string) parse.Pos {
	p := min(int(n.Position()), len(c.text))
	if i := strings.Index(c.text[p:], "."+name); i >= 0 {
		return parse.Pos(p + i)
	}
	if i := strings.LastIndex(c.text[:p], "."+name); i >= 0 {
		return parse.Pos(i)
	}
	return n.Position()
}

func (c *checker) failAt(pos parse.Pos, format string, a ...any) {
	if c.err != nil {
		return
	}
	line, col := place(c.text, pos)
	c.err = &Error{Line: line, Col: col, Msg: fmt.Sprintf(format, a...)}
}

// literalArg checks a literal id given to pciVendor or pciDevice when the
// rule is saved rather than on every machine.
func (c *checker) literalArg(fn string, a parse.Node) {
	s, ok := a.(*parse.StringNode)
	if !ok {
		return
	}
	switch fn {
	case "pciVendor":
		if _, err := pciID(s.Text, false); err != nil {
			c.fail(a, "%v", err)
		}
	case "pciDevice":
		if _, err := pciID(s.Text, true); err != nil {
			c.fail(a, "%v", err)
		}
	}
}

var (
	vendorPattern = regexp.MustCompile(`^[0-9a-f]{4}$`)
	devicePattern = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{4}$`)
)

// pciID normalises a PCI vendor id (10de) or vendor:device id (10de:20b2).
func pciID(s string, device bool) (string, error) {
	id := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(s), "0x"))
	if device {
		if !devicePattern.MatchString(id) {
			return "", fmt.Errorf("pciDevice %q: a PCI device is vendor:device, 4 hex digits each (10de:20b2)", s)
		}
		return id, nil
	}
	if !vendorPattern.MatchString(id) {
		return "", fmt.Errorf("pciVendor %q: a PCI vendor id is 4 hex digits (10de is NVIDIA, 15b3 Mellanox)", s)
	}
	return id, nil
}

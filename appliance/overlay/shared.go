package overlay

import (
	"slices"
	"text/template/parse"
)

// Templates that do not depend on the node they render for (slurm.conf,
// gres.conf and /etc/hosts list every node and read no .Node) render once
// for all the nodes of a profile instead of once each: with a thousand
// nodes each such template ranges over a thousand nodes, and a change
// (the cluster's variables, a node added) would otherwise make every
// node's first fetch after it render the whole cluster again. The fetches
// that miss together wait for one rendering.

// nodeIndependent reports whether a template's output cannot depend on
// the node it is rendered for: it never names Node (.Node, $.Node) and
// never hands the whole Data on (. where dot is the Data, or $), to a
// function, a variable or the output. It runs on the parsed tree before
// instrument (whose {{_step $ N}} hands $ on). Anything it does not know
// counts as dependent.
func nodeIndependent(root *parse.ListNode) bool { return !usesNode(root, true) }

func usesNode(n parse.Node, dotIsData bool) bool {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return false
		}
		return slices.ContainsFunc(n.Nodes, func(c parse.Node) bool { return usesNode(c, dotIsData) })
	case *parse.ActionNode:
		return usesNode(n.Pipe, dotIsData)
	case *parse.PipeNode:
		if n == nil {
			return false
		}
		return slices.ContainsFunc(n.Cmds, func(c *parse.CommandNode) bool { return usesNode(c, dotIsData) })
	case *parse.CommandNode:
		return slices.ContainsFunc(n.Args, func(a parse.Node) bool { return usesNode(a, dotIsData) })
	case *parse.IfNode:
		return usesNode(n.Pipe, dotIsData) || usesNode(n.List, dotIsData) || usesNode(n.ElseList, dotIsData)
	case *parse.WithNode: // dot is the pipeline's value inside, the Data's in else
		return usesNode(n.Pipe, dotIsData) || usesNode(n.List, false) || usesNode(n.ElseList, dotIsData)
	case *parse.RangeNode:
		return usesNode(n.Pipe, dotIsData) || usesNode(n.List, false) || usesNode(n.ElseList, dotIsData)
	case *parse.FieldNode:
		return slices.Contains(n.Ident, "Node")
	case *parse.VariableNode:
		return slices.Contains(n.Ident, "Node") || len(n.Ident) == 1 && n.Ident[0] == "$"
	case *parse.ChainNode:
		return slices.Contains(n.Field, "Node") || usesNode(n.Node, dotIsData)
	case *parse.DotNode:
		return dotIsData
	case *parse.TextNode, *parse.StringNode, *parse.NumberNode, *parse.BoolNode, *parse.NilNode,
		*parse.IdentifierNode, *parse.BreakNode, *parse.ContinueNode, *parse.CommentNode:
		return false
	}
	return true
}

// sharedFile is one node-independent template's rendering for a profile;
// done is closed once data and err are set.
type sharedFile struct {
	key  string // the inputs it was rendered from (input.sharedKey, the overlay's digest)
	done chan struct{}
	data []byte
	err  error
}

// renderShared renders a node-independent template f of overlay (whose
// digest is sha) once for every target of in's profile with the same
// inputs; the callers that ask while it renders wait for it. The entry of
// a template is replaced when its inputs change, so there is at most one
// per profile, template and secrecy.
func (r *Renderer) renderShared(in *input, overlay, sha string, f parsedFile) ([]byte, error) {
	id := in.data.Profile.Name + "\x00" + overlay + "\x00" + f.source
	if in.secrets {
		id += "\x00secrets"
	}
	key := in.sharedKey + "\x00" + sha
	r.mu.Lock()
	e, ok := r.shared[id]
	if ok && e.key == key {
		r.mu.Unlock()
		<-e.done
		return e.data, e.err
	}
	e = &sharedFile{key: key, done: make(chan struct{})}
	if r.shared == nil {
		r.shared = map[string]*sharedFile{}
	}
	r.shared[id] = e
	r.mu.Unlock()
	e.data, e.err = f.render(&in.data)
	close(e.done)
	return e.data, e.err
}

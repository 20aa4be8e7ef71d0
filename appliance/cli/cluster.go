package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
)

// cmdCluster is `rollcall cluster join-code|status|remove|repair|check`.
func cmdCluster(args []string, s streams) error {
	if len(args) == 0 {
		return errors.New("usage: rollcall cluster join-code|status|remove|repair|check|vars")
	}
	stdout := s.stdout
	switch args[0] {
	case "join-code":
		fs := newFlags("cluster join-code", "")
		ttl := fs.Duration("ttl", 60*time.Minute, "how long the code stays valid")
		c, err := fs.client(args[1:], anyArgs)
		if err != nil {
			return err
		}
		var v wire.JoinCodeView
		if err := c.do(http.MethodPost, "/api/v1/cluster/join-codes", wire.JoinCodeRequest{TTL: ttl.String()}, &v); err != nil {
			return err
		}
		fmt.Fprintln(stdout, v.Code)
		return nil
	case "vars":
		return clusterVars(args[1:], stdout)
	case "status":
		return reader[wire.ClusterView]{name: "cluster status", nargs: anyArgs, path: at("/api/v1/cluster"), table: printClusterStatus}.run(args[1:], stdout)
	case "remove":
		fs := newFlags("cluster remove", "rollcall cluster remove NAME")
		c, err := fs.client(args[1:], 1)
		if err != nil {
			return err
		}
		var r wire.Removed
		if err := c.do(http.MethodDelete, "/api/v1/cluster/members/"+url.PathEscape(fs.Arg(0)), nil, &r); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed %s; %d of its certificates revoked by serial\n", fs.Arg(0), r.RevokedCertificates)
		if r.Note != "" {
			fmt.Fprintln(stdout, r.Note)
		}
		return nil
	case "repair":
		fs := newFlags("cluster repair", "rollcall cluster repair NAME")
		c, err := fs.client(args[1:], 1)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "rebuilding %s's store from the leader's…\n", fs.Arg(0))
		var r wire.Repaired
		if err := c.do(http.MethodPost, "/api/v1/cluster/members/"+url.PathEscape(fs.Arg(0))+"/repair", nil, &r); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "repaired %s: its store is the leader's as of index %d\n", fs.Arg(0), r.AppliedIndex)
		return nil
	case "check":
		fs := newFlags("cluster check", "")
		c, err := fs.client(args[1:], anyArgs)
		if err != nil {
			return err
		}
		var r wire.CheckReply
		if err := c.do(http.MethodPost, "/api/v1/cluster/check", nil, &r); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "every node hashes its store at index %d and compares; rollcall cluster status shows a node that differs\n", r.Index)
		return nil
	}
	return fmt.Errorf("unknown cluster command %q (join-code, status, remove, repair, check)", args[0])
}

func printClusterStatus(w io.Writer, v wire.ClusterView) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tADDRESS\tROLE\tVOTER\tSTATE\tAPPLIED\tLAST CONTACT\tBUILD")
	sort.Slice(v.Members, func(i, j int) bool { return v.Members[i].ID < v.Members[j].ID })
	for _, m := range v.Members {
		role := "follower"
		if m.Leader {
			role = "leader"
		}
		voter := "no"
		if m.Voter {
			voter = "yes"
		}
		state, applied, contact, build := "unreachable", "-", "-", "-"
		if m.Status != nil {
			state, applied = strings.ToLower(m.Status.State), fmt.Sprint(m.Status.Applied)
			if m.Status.Build != "" {
				build = m.Status.Build
			} else {
				build = "(no version gate)"
			}
			if m.Leader {
				contact = "-"
			} else if !m.Status.LastContact.IsZero() {
				contact = time.Since(m.Status.LastContact).Round(time.Millisecond).String() + " ago"
			}
		}
		if m.Status != nil && m.Status.Diverged != "" {
			state = "damaged"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.Address, role, voter, state, applied, contact, build)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range v.Members {
		if m.Status == nil {
			continue
		}
		if m.Status.Diverged != "" {
			fmt.Fprintf(w, "%s: %s\n", m.ID, m.Status.Diverged)
		}
		for _, p := range m.Status.Parts {
			if p.State == "failed" {
				fmt.Fprintf(w, "%s: %s failed since %s (%d restarts): %s\n", m.ID, p.Name, p.Since.Format(time.RFC3339), p.Restarts, p.Error)
			}
		}
	}
	printGate(w, v)
	if v.Leader == "" {
		fmt.Fprintln(w, "\nno leader: writes fail until a majority of voters is up")
	}
	return nil
}

// printGate says what the version gate waits for, as the leader sees it
// (the leader decides); nothing when nothing is pending.
func printGate(w io.Writer, v wire.ClusterView) {
	for _, m := range v.Members {
		if !m.Leader || m.Status == nil || m.Status.Gate == nil {
			continue
		}
		g := m.Status.Gate
		fmt.Fprintf(w, "\nversion gate: %s not open yet\n", strings.Join(g.Pending, ", "))
		for _, why := range g.Waiting {
			fmt.Fprintf(w, "  waiting for %s\n", why)
		}
	}
}

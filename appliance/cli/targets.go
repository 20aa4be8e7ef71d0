package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/rollcall/rollcall/appliance/apiclient"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// Bulk actions name their machines as one machine (ID or name) or as
// tag:NAME, every machine that carries the tag (the spec's `rollcall power
// tag:rack-3 off`). Every verb that takes tag:NAME expands it here
// (machineIDs) and runs through eachMachine, so they all print and fail
// alike.

// tagPrefix marks a machine argument that names a tag.
const tagPrefix = "tag:"

// fanOut is how many machines a bulk action works on at once: BMC jobs
// take seconds each, and the API serves a handful of them in parallel
// without crowding out other callers.
const fanOut = 8

// machineIDs expands a machine argument: tag:NAME is every machine that
// carries the tag, manually or by its rule, sorted by ID (an error when
// none does); anything else is the one machine it names, as given.
func (c *client) machineIDs(arg string) ([]string, error) {
	name, ok := strings.CutPrefix(arg, tagPrefix)
	if !ok {
		return []string{arg}, nil
	}
	if err := store.ValidTagName(name); err != nil {
		return nil, errors.New(store.Public(err))
	}
	var l wire.MachineList
	if err := c.do(http.MethodGet, "/api/v1/machines?tag="+url.QueryEscape(name), nil, &l); err != nil {
		return nil, err
	}
	if len(l.Machines) == 0 {
		// Say which: no such tag, or a tag no machine carries.
		err := c.do(http.MethodGet, "/api/v1/tags/"+url.PathEscape(name), nil, nil)
		var ae *apiclient.Error
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return nil, fmt.Errorf("no tag %s; create it with rollcall tags add %s", name, name)
		}
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("no machine carries tag %s", name)
	}
	ids := make([]string, len(l.Machines))
	for i, m := range l.Machines {
		ids[i] = m.ID
	}
	return ids, nil
}

// outcome is what a bulk action did to one machine: a line for people,
// the API's answer for -json, or the error.
type outcome struct {
	line string
	raw  json.RawMessage
	err  error
}

// bulkResult is one machine's outcome under -json.
type bulkResult struct {
	Machine string          `json:"machine"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// eachMachine runs do on every machine arg names (machineIDs), fanOut at a
// time, and prints one line per machine in ID order: do's line, or the
// machine and its error; with asJSON, the API's answer (one machine named
// directly) or a list of {machine, result|error}. It fails once every
// machine has run if any failed: with the error itself when arg named one
// machine, else with how many.
func (c *client) eachMachine(arg string, asJSON bool, w io.Writer, do func(id string) outcome) error {
	ids, err := c.machineIDs(arg)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(arg, tagPrefix) {
		o := do(ids[0])
		if o.err != nil {
			return o.err
		}
		if asJSON {
			return printJSON(w, o.raw)
		}
		_, err := fmt.Fprintln(w, o.line)
		return err
	}
	outs := make([]outcome, len(ids))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(fanOut, len(ids)) {
		wg.Go(func() {
			for i := range next {
				outs[i] = do(ids[i])
			}
		})
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	failed := 0
	results := make([]bulkResult, len(ids))
	for i, o := range outs {
		results[i] = bulkResult{Machine: ids[i], Result: o.raw}
		if o.err != nil {
			failed++
			results[i].Error = o.err.Error()
		}
		if asJSON {
			continue
		}
		if o.err != nil {
			fmt.Fprintf(w, "%s: failed: %v\n", ids[i], o.err)
		} else {
			fmt.Fprintln(w, o.line)
		}
	}
	if asJSON {
		b, err := json.Marshal(results)
		if err != nil {
			return err
		}
		if err := printJSON(w, b); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d machines with tag %s failed", failed, len(ids), strings.TrimPrefix(arg, tagPrefix))
	}
	return nil
}

// call is an outcome of one API call: its answer decoded into v and
// described by line.
func call[T any](c *client, method, path string, in any, line func(T) string) outcome {
	var raw json.RawMessage
	if err := c.do(method, path, in, &raw); err != nil {
		return outcome{err: err}
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return outcome{err: err}
	}
	return outcome{line: line(v), raw: raw}
}

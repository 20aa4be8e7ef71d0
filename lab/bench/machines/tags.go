package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The tag phase (issue 19): saving a rule that reads every machine's
// inventory facts, timed from the request until every node lists the
// machines it matched; then GET /api/v1/machines?tag= and ?rack= on a
// follower against the unfiltered list in the same run.

type tagResult struct {
	saves             []tagSave
	tagLat, rackLat   latencies
	fullLat           latencies
	tagRows, rackRows int
}

type tagSave struct {
	rule    string
	matched int
	took    time.Duration // until every node lists the matches
	answer  time.Duration // the save's own answer
}

func tagPhase(ctx context.Context, c *cluster, follower, lists int) (tagResult, error) {
	var res tagResult
	const tag = "bench-gpu"
	leader := c.leader()
	for i, rule := range []string{`{{ pciVendor "10de" }}`, `{{ pciVendor "8086" }}`, `{{ pciVendor "10de" }}`} {
		method, path := "PUT", "/api/v1/tags/"+tag
		if i == 0 {
			method, path = "POST", "/api/v1/tags"
		}
		body, _ := json.Marshal(map[string]string{"name": tag, "match": rule})
		var saved struct {
			Index   uint64 `json:"index"`
			Matched int    `json:"matched"`
		}
		t0 := time.Now()
		if _, err := c.call(ctx, method, c.url(leader, path), "admin", body, &saved); err != nil {
			return res, fmt.Errorf("save tag rule %s: %w", rule, err)
		}
		answer := time.Since(t0)
		// Every node at once, each asked for its tag list at the save's
		// index (a small answer: the list of 10,000 machines would time
		// this program's JSON decoding, not the nodes).
		errs := make(chan error, len(c.nodes))
		for k := range c.nodes {
			go func() { errs <- awaitTagCount(ctx, c, k, tag, saved.Index, saved.Matched) }()
		}
		for range c.nodes {
			if err := <-errs; err != nil {
				return res, err
			}
		}
		s := tagSave{rule: rule, matched: saved.Matched, took: time.Since(t0), answer: answer}
		// The filtered list agrees with the count on every node.
		for k := range c.nodes {
			n, err := countList(ctx, c, k, "tag="+tag+"&min_index="+strconv.FormatUint(saved.Index, 10))
			if err != nil {
				return res, err
			}
			if n != saved.Matched {
				return res, fmt.Errorf("node %s lists %d machines tagged %s, the save matched %d", c.nodes[k].Name(), n, tag, saved.Matched)
			}
		}
		res.saves = append(res.saves, s)
		logf("tag save %d (%s): %d machines matched, answered in %s, on every node in %s", i+1, rule, s.matched, ms(s.answer), ms(s.took))
	}
	// A rack for the matched machines, in one bulk command.
	if _, err := c.call(ctx, "PUT", c.url(leader, "/api/v1/racks/bench-r1"), "admin", []byte(`{}`), nil); err != nil {
		return res, fmt.Errorf("rack: %w", err)
	}
	var loc struct {
		Index uint64 `json:"index"`
	}
	if _, err := c.call(ctx, "POST", c.url(leader, "/api/v1/locations"), "admin", []byte(`{"tag":"`+tag+`","rack":"bench-r1"}`), &loc); err != nil {
		return res, fmt.Errorf("bulk location: %w", err)
	}
	if _, err := countList(ctx, c, follower, "rack=bench-r1&min_index="+strconv.FormatUint(loc.Index, 10)); err != nil {
		return res, err
	}
	// Interleaved: tag, rack, unfiltered, on the follower. The answers
	// are read into one buffer: the nodes share this process's collector,
	// and a fresh 10 MB per answer would time this program's garbage.
	var buf bytes.Buffer
	for range lists {
		for _, q := range []struct {
			query string
			lat   *latencies
			rows  *int
		}{{"tag=" + tag, &res.tagLat, &res.tagRows}, {"rack=bench-r1", &res.rackLat, &res.rackRows}, {"", &res.fullLat, nil}} {
			// Timed as the plain list is (list in main.go): until the
			// body is read; the rows are counted after.
			t0 := time.Now()
			buf.Reset()
			if err := readList(ctx, c, follower, q.query, &buf); err != nil {
				return res, err
			}
			*q.lat = append(*q.lat, time.Since(t0))
			if q.rows != nil {
				var err error
				if *q.rows, err = countRows(buf.Bytes()); err != nil {
					return res, err
				}
			}
		}
	}
	return res, nil
}

// countList lists machines on node k with query and counts them.
func countList(ctx context.Context, c *cluster, k int, query string) (int, error) {
	body, err := getList(ctx, c, k, query)
	if err != nil {
		return 0, err
	}
	return countRows(body)
}

// getList reads the machine list on node k with query.
func getList(ctx context.Context, c *cluster, k int, query string) ([]byte, error) {
	u := c.url(k, "/api/v1/machines")
	if query != "" {
		u += "?" + query
	}
	return getBody(ctx, c, u)
}

func getBody(ctx context.Context, c *cluster, u string) ([]byte, error) {
	var buf bytes.Buffer
	err := readBody(ctx, c, u, &buf)
	return buf.Bytes(), err
}

// readList reads the machine list on node k with query into buf.
func readList(ctx context.Context, c *cluster, k int, query string, buf *bytes.Buffer) error {
	u := c.url(k, "/api/v1/machines")
	if query != "" {
		u += "?" + query
	}
	return readBody(ctx, c, u, buf)
}

func readBody(ctx context.Context, c *cluster, u string, buf *bytes.Buffer) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+c.admin)
	resp, err := c.httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %.512s", u, resp.Status, buf.Bytes())
	}
	return nil
}

func countRows(body []byte) (int, error) {
	var l struct {
		Machines []json.RawMessage `json:"machines"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return 0, err
	}
	return len(l.Machines), nil
}

// awaitTagCount polls node k's tag list at index until tag counts want
// machines.
func awaitTagCount(ctx context.Context, c *cluster, k int, tag string, index uint64, want int) error {
	for {
		body, err := getBody(ctx, c, c.url(k, "/api/v1/tags?min_index="+strconv.FormatUint(index, 10)))
		if err != nil {
			return err
		}
		var l struct {
			Tags []struct {
				Name     string `json:"name"`
				Machines int    `json:"machines"`
			} `json:"tags"`
		}
		if err := json.Unmarshal(body, &l); err != nil {
			return err
		}
		for _, t := range l.Tags {
			if t.Name == tag && t.Machines == want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (r tagResult) print() {
	verdict := func(ok bool) string {
		if ok {
			return "meets"
		}
		return "MISSES"
	}
	fmt.Printf("\nTag rule saves over the fleet (request → every node lists the matches):\n")
	for i, s := range r.saves {
		fmt.Printf("  save %d %-26s %5d matched  answer %9s  all nodes %9s  (target ≤ 1 s: %s)\n", i+1, s.rule, s.matched, ms(s.answer), ms(s.took), verdict(s.took <= time.Second))
	}
	fmt.Printf("Filtered lists on the follower, %d rounds interleaved (the unfiltered list is the peer):\n", len(r.tagLat))
	for _, l := range []struct {
		name string
		lat  latencies
		rows int
	}{{"?tag=bench-gpu", r.tagLat, r.tagRows}, {"?rack=bench-r1", r.rackLat, r.rackRows}} {
		fmt.Printf("  %-16s %5d rows  p50 %9s  p99 %9s  (target p99 ≤ 20 ms: %s)\n", l.name, l.rows, ms(l.lat.pct(0.5)), ms(l.lat.pct(0.99)), verdict(l.lat.pct(0.99) <= 20*time.Millisecond))
	}
	fmt.Printf("  %-16s %5s       p50 %9s  p99 %9s\n", "unfiltered", "all", ms(r.fullLat.pct(0.5)), ms(r.fullLat.pct(0.99)))
}

func (c *cluster) leader() int {
	for k, n := range c.nodes {
		if n.Cluster().IsLeader() {
			return k
		}
	}
	return 0
}

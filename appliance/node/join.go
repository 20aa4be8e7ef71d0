package node

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/cluster"
	"github.com/rollcall/rollcall/store"
)

// Joining, in three steps:
//  1. the new node checks the cluster by the CA fingerprint in the code
//     (pinned TLS, no certificate of its own yet) and sends the code's secret
//     with a CSR to /open/v1/join on the code's address;
//  2. that node spends the code through Raft (once, before it expires), signs
//     the CSR with the CA key it opens from the store, and returns the
//     certificate and the master key;
//  3. the new node starts Raft with its certificate and asks, now over mutual
//     TLS, to be added as a voter; the leader then replicates to it.

// join obtains this node's certificate and the master key with a join code
// and writes them to the data directory.
func (n *Node) join(ctx context.Context, code pki.JoinCode) error {
	if time.Now().After(code.Expires) {
		return fmt.Errorf("join: the code expired at %s; ask for a new one with `rollcall cluster join-code`", code.Expires.UTC().Format(time.RFC3339))
	}
	keyPEM, csrPEM, err := pki.NewKeyAndCSR(n.opts.Name, n.hosts())
	if err != nil {
		return err
	}
	advertise := n.opts.RaftAdvertise
	if advertise == "" {
		advertise = n.opts.RaftAddr
	}
	body, _ := json.Marshal(wire.JoinRequest{
		Secret: hex.EncodeToString(code.Secret[:]), Name: n.opts.Name, RaftAddr: advertise, CSR: string(csrPEM),
	})
	client := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{DialTLSContext: func(ctx context.Context, _, a string) (net.Conn, error) {
			return cluster.DialCalls(ctx, pki.PinnedTLS(code.CAFingerprint), a)
		}},
	}
	defer client.CloseIdleConnections()
	// The cluster may be electing a leader (503): retry for a minute. A
	// refusal (403, 400, 409) is final.
	var reply wire.JoinReply
	deadline := time.Now().Add(time.Minute)
	for {
		status, err := postJoin(ctx, client, code.Addr, body, &reply)
		if err != nil {
			return err
		}
		if status == http.StatusOK {
			break
		}
		if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return fmt.Errorf("join refused by %s: %s", code.Addr, reply.Error)
		}
		n.log.Info("join: the cluster is busy; retrying", "reason", reply.Error)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	ca, err := pki.ParseCertPEM([]byte(reply.CACert))
	if err != nil || pki.Fingerprint(ca) != code.CAFingerprint {
		return errors.New("join: the cluster sent a CA that does not match the code's fingerprint")
	}
	keyBytes, err := hex.DecodeString(reply.MasterKey)
	if err != nil || len(keyBytes) != 32 {
		return errors.New("join: the cluster sent a malformed master key")
	}
	var key pki.MasterKey
	copy(key[:], keyBytes)
	if err := key.Save(n.path(fileMasterKey)); err != nil {
		return err
	}
	if reply.AdminToken != "" {
		if err := writeFileAtomic(n.path(fileAdmin), []byte(reply.AdminToken+"\n"), 0o600); err != nil {
			return err
		}
	}
	return writeTLSFiles(n.path(dirTLS), []byte(reply.CACert), []byte(reply.Cert), keyPEM)
}

func postJoin(ctx context.Context, client *http.Client, addr string, body []byte, reply *wire.JoinReply) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+"/open/v1/join", bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("join: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("join %s: %w (is the address in the code reachable, and is it the cluster whose CA the code names?)", addr, err)
	}
	defer resp.Body.Close()
	*reply = wire.JoinReply{}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(reply); err != nil {
		return 0, fmt.Errorf("join %s: unreadable answer (%s): %w", addr, resp.Status, err)
	}
	return resp.StatusCode, nil
}

// announce asks the cluster (through the node that issued the code) to add
// this node as a voter, then records its addresses.
func (n *Node) announce(ctx context.Context, via string) error {
	body, _ := json.Marshal(map[string]any{"id": n.opts.Name, "address": n.cluster.Advertise(), "voter": true})
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err = n.cluster.Call(cctx, via, http.MethodPost, "/v1/members", body, nil)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if err != nil {
		return fmt.Errorf("join: add this node to the cluster: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := n.cluster.WaitLeader(wctx); err != nil {
		return fmt.Errorf("join: no leader seen after being added: %w", err)
	}
	return n.putNodeRecord(wctx)
}

// calls are this node's routes on the cluster port beside raftfsm/cluster's own.
func (n *Node) calls() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /open/v1/join", n.handleJoin)
	mux.Handle("GET /v1/blobs/{sha}", n.blobs)
	return mux
}

func (n *Node) handleJoin(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(wire.JoinReply{Error: msg})
	}
	var req wire.JoinRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fail(http.StatusBadRequest, "malformed join request")
		return
	}
	secret, err := hex.DecodeString(req.Secret)
	if err != nil || len(secret) != 32 {
		fail(http.StatusBadRequest, "malformed join secret")
		return
	}
	if err := store.ValidName(req.Name); err != nil {
		fail(http.StatusBadRequest, "node name: "+err.Error())
		return
	}
	if _, _, err := net.SplitHostPort(req.RaftAddr); err != nil {
		fail(http.StatusBadRequest, "raft address must be host:port")
		return
	}
	members, err := n.cluster.Members(r.Context(), time.Second)
	if err == nil {
		for _, m := range members {
			if m.ID == req.Name {
				fail(http.StatusConflict, fmt.Sprintf("a member named %q already exists; remove it first or choose another -name", req.Name))
				return
			}
		}
	}
	var code pki.JoinCode
	copy(code.Secret[:], secret)
	hash := code.SecretHash()
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	_, err = n.cluster.Apply(ctx, &raftfsm.JoinCodeUse{SecretHash: hex.EncodeToString(hash[:]), Node: req.Name, Now: time.Now().UTC()})
	if err != nil {
		status := http.StatusServiceUnavailable
		if errors.Is(err, store.ErrForbidden) {
			status = http.StatusForbidden
		}
		n.log.Warn("join refused", "peer", req.Name, "remote", r.RemoteAddr, "err", err)
		fail(status, err.Error())
		return
	}
	ca, token, err := n.openSecrets()
	if err != nil {
		n.log.Error("join: cannot open the cluster CA", "err", err)
		fail(http.StatusInternalServerError, "this node cannot sign certificates right now")
		return
	}
	cert, err := ca.SignNode([]byte(req.CSR), req.Name, time.Now(), nodeCertTTL)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	n.log.Info("node joined: certificate issued", "peer", req.Name, "raft", req.RaftAddr)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(wire.JoinReply{CACert: string(n.trust.Load().BundlePEM()), Cert: string(cert), MasterKey: hex.EncodeToString(n.key[:]), AdminToken: token})
}

// openSecrets unseals the CA key and the first admin token kept in the store.
func (n *Node) openSecrets() (*pki.CA, string, error) {
	var id store.ClusterIdentity
	if err := n.db.View(func(tx *store.Tx) error {
		var err error
		id, err = tx.Identity()
		return err
	}); err != nil {
		return nil, "", fmt.Errorf("cluster identity: %w", err)
	}
	keyPEM, err := n.key.Open(id.SealedCAKey, []byte(pki.CAKeyAAD))
	if err != nil {
		return nil, "", err
	}
	ca, err := pki.ParseCA([]byte(id.CACertPEM), keyPEM)
	if err != nil {
		return nil, "", err
	}
	var token string
	if len(id.SealedAdminToken) > 0 {
		b, err := n.key.Open(id.SealedAdminToken, []byte(aadAdminToken))
		if err != nil {
			return nil, "", err
		}
		token = string(b)
	}
	return ca, token, nil
}

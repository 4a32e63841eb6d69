package nfs

// NFSv4 client identity and sessions: SETCLIENTID, SETCLIENTID_CONFIRM and
// RENEW (4.0); EXCHANGE_ID, CREATE_SESSION, DESTROY_SESSION, SEQUENCE,
// BIND_CONN_TO_SESSION, BACKCHANNEL_CTL, DESTROY_CLIENTID, RECLAIM_COMPLETE,
// TEST_STATEID and FREE_STATEID (4.1).
//
// The server never calls back (no delegations, no layouts), so callback
// addresses and back-channel attributes are accepted and not used; 4.1
// sessions are created without CONN_BACK_CHAN, and SEQUENCE reports
// CB_PATH_DOWN only if the client asked for a back channel.

import (
	"fmt"
	"time"

	"github.com/tristore/tristore/proto/nfs4"
	"github.com/tristore/tristore/proto/sunrpc"
)

func timeNow() time.Time { return time.Now() }

// principal identifies who sent a request, for the rule that only the
// principal that made a client record may change it.
func (c *compound) principal() string {
	return fmt.Sprintf("%d/%d", c.req.call.Cred.Flavor, c.req.auth.uid)
}

func op4SetClientID(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.SetClientIDArgs)
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	key := string(args.ID)
	conf := v4.confirmed[key]
	if conf != nil && conf.principal != c.principal() && len(conf.owners) > 0 {
		return &nfs4.SetClientIDRes{Status: nfs4.ErrClidInUse, NetID: "tcp", Addr: c.req.c.addr.String()}
	}
	if old := v4.unconfirmed[key]; old != nil {
		v4.removeClient(old)
	}
	cl := &v4client{ownerID: append([]byte(nil), args.ID...), verf: args.Verifier, principal: c.principal(),
		confirmVerf: randomVerifier(), renewed: time.Now(), minor: 0}
	if conf != nil && conf.verf == args.Verifier {
		cl.id = conf.id // a callback update keeps the client ID
	} else {
		cl.id = v4.newClientID()
	}
	v4.unconfirmed[key] = cl
	if conf == nil || conf.id != cl.id {
		v4.clients[cl.id] = cl
	}
	return &nfs4.SetClientIDRes{ClientID: cl.id, Confirm: cl.confirmVerf}
}

func op4SetClientIDConfirm(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.SetClientIDConfirmArgs)
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	var unconf *v4client
	for _, cl := range v4.unconfirmed {
		if cl.id == args.ClientID {
			unconf = cl
		}
	}
	if unconf == nil {
		// A retransmitted confirm of a record already confirmed succeeds.
		if cl := v4.clients[args.ClientID]; cl != nil && cl.confirmed && cl.confirmVerf == args.Confirm {
			cl.renewed = time.Now()
			return &nfs4.StatusRes{}
		}
		return &nfs4.StatusRes{Status: nfs4.ErrStaleClientID}
	}
	if unconf.confirmVerf != args.Confirm {
		return &nfs4.StatusRes{Status: nfs4.ErrStaleClientID}
	}
	if unconf.principal != c.principal() {
		return &nfs4.StatusRes{Status: nfs4.ErrClidInUse}
	}
	key := string(unconf.ownerID)
	delete(v4.unconfirmed, key)
	if old := v4.confirmed[key]; old != nil {
		if old.id == unconf.id {
			// Callback update: the confirmed record takes the new verifier.
			old.confirmVerf, old.renewed = unconf.confirmVerf, time.Now()
			return &nfs4.StatusRes{}
		}
		v4.removeClient(old) // the client rebooted: its old state goes
	}
	unconf.confirmed = true
	unconf.renewed = time.Now()
	v4.clients[unconf.id] = unconf
	v4.confirmed[key] = unconf
	v4.persistLocked()
	return &nfs4.StatusRes{}
}

func op4Renew(c *compound, a nfs4.Args) nfs4.Res {
	id := a.(*nfs4.ClientIDArgs).ClientID
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	_, st := v4.client(id)
	return &nfs4.StatusRes{Status: st}
}

func op4ExchangeID(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.ExchangeIDArgs)
	if args.Flags&^(nfs4.ExchgIDSuppMovedRefer|nfs4.ExchgIDSuppMovedMigr|nfs4.ExchgIDBindPrincStateID|
		nfs4.ExchgIDMaskPNFS|nfs4.ExchgIDUpdConfirmedRecA) != 0 || args.Flags&nfs4.ExchgIDConfirmedR != 0 {
		return &nfs4.ExchangeIDRes{Status: nfs4.ErrInval}
	}
	if args.Protect == nfs4.SP4SSV {
		return &nfs4.ExchangeIDRes{Status: nfs4.ErrEncrAlgUnsupp}
	}
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	key := string(args.OwnerID)
	conf := v4.confirmed[key]
	res := func(cl *v4client) *nfs4.ExchangeIDRes {
		r := &nfs4.ExchangeIDRes{ClientID: cl.id, Sequence: cl.csSeq + 1, Flags: nfs4.ExchgIDUseNonPNFS,
			Protect: args.Protect, MinorID: 0, MajorID: []byte(c.s.v4owner()), Scope: []byte(c.s.v4owner()),
			Impl: []nfs4.ImplID{{Domain: "tristore.dev", Name: "tristore"}}}
		if args.Protect == nfs4.SP4MachCred {
			r.MustEnforce, r.MayAllow = nil, args.MayAllow
		}
		if cl.confirmed {
			r.Flags |= nfs4.ExchgIDConfirmedR
		}
		return r
	}
	if args.Flags&nfs4.ExchgIDUpdConfirmedRecA != 0 {
		switch {
		case conf == nil:
			return &nfs4.ExchangeIDRes{Status: nfs4.ErrNoEnt}
		case conf.principal != c.principal():
			return &nfs4.ExchangeIDRes{Status: nfs4.ErrPerm}
		case conf.verf != args.Verifier:
			return &nfs4.ExchangeIDRes{Status: nfs4.ErrNotSame}
		}
		conf.renewed = time.Now()
		return res(conf)
	}
	if conf != nil && conf.principal != c.principal() {
		// Another principal uses this owner: it may take the record over
		// only if the record holds nothing (RFC 8881 18.35.5 case 3).
		if v4.hasState(conf) && time.Since(conf.renewed) <= v4.lease {
			return &nfs4.ExchangeIDRes{Status: nfs4.ErrClidInUse}
		}
		v4.removeClient(conf)
		v4.persistLocked()
		conf = nil
	}
	if conf != nil && conf.verf == args.Verifier {
		conf.renewed = time.Now() // case 2: the same client again
		return res(conf)
	}
	// Cases 1, 4 and 5: a new unconfirmed record with a new client ID
	// (one left unconfirmed is replaced; a confirmed one from before a
	// client reboot goes when the new one is confirmed).
	if old := v4.unconfirmed[key]; old != nil {
		v4.removeClient(old)
	}
	cl := &v4client{id: v4.newClientID(), ownerID: append([]byte(nil), args.OwnerID...), verf: args.Verifier,
		principal: c.principal(), renewed: time.Now(), minor: 1, sessions: map[[nfs4.SessionIDSize]byte]*v4session{}}
	v4.unconfirmed[key] = cl
	v4.clients[cl.id] = cl
	return res(cl)
}

// hasState reports whether a client holds opens, locks or sessions.
func (st *v4state) hasState(cl *v4client) bool {
	if len(cl.sessions) > 0 {
		return true
	}
	for _, o := range cl.owners {
		if len(o.states) > 0 {
			return true
		}
	}
	return false
}

// v4owner is the server owner and scope: one server, one owner.
func (s *Server) v4owner() string { return "tristore" }

func negotiate(want nfs4.ChannelAttrs) nfs4.ChannelAttrs {
	got := nfs4.ChannelAttrs{
		MaxRequestSize:        min(want.MaxRequestSize, v4MaxReqSize),
		MaxResponseSize:       min(want.MaxResponseSize, v4MaxRespSize),
		MaxResponseSizeCached: min(want.MaxResponseSizeCached, v4MaxCached),
		MaxOperations:         min(want.MaxOperations, v4MaxOps),
		MaxRequests:           max(min(want.MaxRequests, v4MaxSlots), 1),
	}
	return got
}

func op4CreateSession(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.CreateSessionArgs)
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	cl := v4.clients[args.ClientID]
	if cl == nil || cl.minor < 1 {
		return &nfs4.CreateSessionRes{Status: nfs4.ErrStaleClientID}
	}
	if !cl.confirmed && time.Since(cl.renewed) > v4.lease {
		// An unconfirmed record lives one lease (RFC 8881 18.35.4).
		v4.removeClient(cl)
		return &nfs4.CreateSessionRes{Status: nfs4.ErrStaleClientID}
	}
	switch {
	case args.Sequence == cl.csSeq && cl.csReply != nil:
		r := *cl.csReply
		return &r
	case args.Sequence != cl.csSeq+1:
		return &nfs4.CreateSessionRes{Status: nfs4.ErrSeqMisordered}
	}
	if cl.principal != c.principal() {
		return &nfs4.CreateSessionRes{Status: nfs4.ErrClidInUse}
	}
	if len(cl.sessions) >= v4MaxSessions {
		// Each session may keep up to slots x cached-reply bytes: a client
		// that keeps making sessions without destroying them is told to
		// wait (knfsd answers DELAY when its reply-cache memory is spent).
		return &nfs4.CreateSessionRes{Status: nfs4.ErrDelay}
	}
	if args.Flags&^(nfs4.CreateSessionPersist|nfs4.CreateSessionConnBackChan|nfs4.CreateSessionConnRDMA) != 0 {
		return &nfs4.CreateSessionRes{Status: nfs4.ErrInval}
	}
	// Channels on which no request or reply could ever fit (RFC 8881
	// 18.36.3: NFS4ERR_TOOSMALL).
	for _, ch := range []nfs4.ChannelAttrs{args.Fore, args.Back} {
		if ch.MaxRequestSize < v4MinChannel || ch.MaxResponseSize < v4MinChannel || ch.MaxRequests < 1 {
			return &nfs4.CreateSessionRes{Status: nfs4.ErrTooSmall}
		}
	}
	if args.Fore.MaxOperations < 2 {
		return &nfs4.CreateSessionRes{Status: nfs4.ErrTooSmall}
	}
	if !cl.confirmed {
		key := string(cl.ownerID)
		if old := v4.confirmed[key]; old != nil && old != cl {
			v4.removeClient(old)
		}
		delete(v4.unconfirmed, key)
		cl.confirmed = true
		v4.confirmed[key] = cl
		v4.persistLocked()
	}
	cl.renewed = time.Now()
	sess := &v4session{client: cl, fore: negotiate(args.Fore), back: args.Back}
	copy(sess.id[:8], fmt.Appendf(nil, "%08x", cl.id)[:8])
	other := v4.newOther()
	copy(sess.id[4:], other[:])
	sess.slots = make([]v4slot, sess.fore.MaxRequests)
	v4.sessions[sess.id] = sess
	if cl.sessions == nil {
		cl.sessions = map[[nfs4.SessionIDSize]byte]*v4session{}
	}
	cl.sessions[sess.id] = sess
	cl.csSeq = args.Sequence
	r := &nfs4.CreateSessionRes{SessionID: sess.id, Sequence: args.Sequence,
		Flags: args.Flags &^ (nfs4.CreateSessionPersist | nfs4.CreateSessionConnBackChan | nfs4.CreateSessionConnRDMA),
		Fore:  sess.fore, Back: args.Back}
	cl.csReply = r
	return r
}

func op4DestroySession(c *compound, a nfs4.Args) nfs4.Res {
	id := a.(*nfs4.SessionArgs).SessionID
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	sess := v4.sessions[id]
	if sess == nil {
		return &nfs4.StatusRes{Status: nfs4.ErrBadSession}
	}
	if c.sess == sess {
		// Destroying the session this compound runs in: its slot is gone
		// with it, nothing to cache.
		c.slot, c.sess = nil, nil
	}
	delete(v4.sessions, id)
	delete(sess.client.sessions, id)
	return &nfs4.StatusRes{}
}

// replayRes carries a 4.1 slot's cached reply.
type replayRes struct{ reply []byte }

func (replayRes) Encode(*sunrpc.Writer)  {}
func (*replayRes) Decode(*sunrpc.Reader) {}
func (*replayRes) Stat() nfs4.Status     { return nfs4.OK }

func op4Sequence(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.SequenceArgs)
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	sess := v4.sessions[args.SessionID]
	if sess == nil {
		return &nfs4.SequenceRes{Status: nfs4.ErrBadSession}
	}
	if int(args.Slot) >= len(sess.slots) {
		return &nfs4.SequenceRes{Status: nfs4.ErrBadSlot}
	}
	if args.HighestSlot < args.Slot || int(args.HighestSlot) >= len(sess.slots) {
		return &nfs4.SequenceRes{Status: nfs4.ErrBadHighSlot}
	}
	sl := &sess.slots[args.Slot]
	switch {
	case c.nops > sess.fore.MaxOperations:
		return &nfs4.SequenceRes{Status: nfs4.ErrTooManyOps}
	case c.reqLen > int(sess.fore.MaxRequestSize):
		return &nfs4.SequenceRes{Status: nfs4.ErrReqTooBig}
	case sl.inUse:
		return &nfs4.SequenceRes{Status: nfs4.ErrDelay}
	case args.Sequence == sl.seq && sl.seq != 0:
		if !sl.cached {
			return &nfs4.SequenceRes{Status: nfs4.ErrRetryUncachedRep}
		}
		return &replayRes{reply: append([]byte(nil), sl.reply...)}
	case args.Sequence != sl.seq+1:
		return &nfs4.SequenceRes{Status: nfs4.ErrSeqMisordered}
	}
	sl.seq = args.Sequence
	sl.inUse = true
	sl.cached = false
	c.sess, c.slot, c.cacheThis = sess, sl, args.CacheThis
	sess.client.renewed = time.Now()
	res := &nfs4.SequenceRes{SessionID: sess.id, Sequence: args.Sequence, Slot: args.Slot,
		HighestSlot: uint32(len(sess.slots) - 1), TargetHighestSlot: uint32(len(sess.slots) - 1)}
	if v4.mayReclaim(sess.client) {
		res.StatusFlags |= nfs4.Seq4StatusRestartReclaimNeeded
	}
	return res
}

func op4BindConn(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.BindConnArgs)
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	if v4.sessions[args.SessionID] == nil {
		return &nfs4.BindConnRes{Status: nfs4.ErrBadSession}
	}
	if args.Dir < nfs4.ChanDirFore || args.Dir > nfs4.ChanDirBoth+1 {
		return &nfs4.BindConnRes{Status: nfs4.ErrInval}
	}
	return &nfs4.BindConnRes{SessionID: args.SessionID, Dir: nfs4.ChanDirFore}
}

func op4BackchannelCtl(c *compound, _ nfs4.Args) nfs4.Res { return &nfs4.StatusRes{} }

func op4DestroyClientID(c *compound, a nfs4.Args) nfs4.Res {
	id := a.(*nfs4.ClientIDArgs).ClientID
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	cl := v4.clients[id]
	if cl == nil {
		return &nfs4.StatusRes{Status: nfs4.ErrStaleClientID}
	}
	// Busy only while it holds state (RFC 8881 18.50.3): an owner
	// without opens or locks left is not state, and is freed with it.
	busy := len(cl.sessions) > 0
	for _, o := range cl.owners {
		busy = busy || len(o.states) > 0
	}
	if busy {
		return &nfs4.StatusRes{Status: nfs4.ErrClientIDBusy}
	}
	wasConfirmed := cl.confirmed
	v4.removeClient(cl)
	if wasConfirmed {
		v4.persistLocked()
	}
	return &nfs4.StatusRes{}
}

func op4ReclaimComplete(c *compound, a nfs4.Args) nfs4.Res {
	oneFS := a.(*nfs4.ReclaimCompleteArgs).OneFS
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	if oneFS {
		// Per-file-system reclaim ends nothing here (one grace period
		// covers every export); the client's global RECLAIM_COMPLETE does.
		if !c.cur.set {
			return &nfs4.StatusRes{Status: nfs4.ErrNoFileHandle}
		}
		return &nfs4.StatusRes{}
	}
	cl := c.sess.client
	if cl.reclaimDone {
		return &nfs4.StatusRes{Status: nfs4.ErrCompleteAlready}
	}
	v4.endReclaim(cl)
	return &nfs4.StatusRes{}
}

func op4TestStateID(c *compound, a nfs4.Args) nfs4.Res {
	ids := a.(*nfs4.TestStateIDArgs).Stateids
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	res := &nfs4.TestStateIDRes{}
	for _, sid := range ids {
		st := nfs4.ErrBadStateID
		if !sid.Special() {
			var s *v4stateid
			if s, st = v4.findState(sid, c.minor); st == nfs4.OK && s.owner.client != c.sess.client {
				st = nfs4.ErrBadStateID
			}
		}
		res.Codes = append(res.Codes, st)
	}
	return res
}

func op4FreeStateID(c *compound, a nfs4.Args) nfs4.Res {
	sid, st := c.resolveStateid(a.(*nfs4.StateidArgs).Stateid)
	if st != nfs4.OK {
		return &nfs4.StatusRes{Status: st}
	}
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	if sid.Special() {
		return &nfs4.StatusRes{Status: nfs4.ErrBadStateID}
	}
	s, st := v4.findState(sid, c.minor)
	if st != nfs4.OK {
		return &nfs4.StatusRes{Status: st}
	}
	if !s.lock || len(s.ranges) > 0 {
		return &nfs4.StatusRes{Status: nfs4.ErrLocksHeld}
	}
	v4.removeState(s)
	return &nfs4.StatusRes{}
}

package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxMessageBytes bounds one JSON-RPC message on stdio.
const MaxMessageBytes = 32 << 20

// StdioTransport is newline-delimited JSON-RPC over a reader and a writer
// (the process's stdin and stdout) that survives bad input: a line that is
// not JSON, not a JSON-RPC message, a batch, or over MaxMessageBytes is
// answered with a JSON-RPC error and skipped, where the SDK's own stdio
// transport would end the connection.
//
// The connection ends when In does, but only once every request read
// before has been answered (at most Drain after the end of In): a client
// that sends its requests and closes its end gets their results, and what
// the calls changed is brought back, instead of the calls being cancelled
// with the connection.
type StdioTransport struct {
	In  io.Reader
	Out io.Writer
	// Drain bounds the wait for the answers after In ends (zero: DrainMax).
	Drain time.Duration
}

// DrainMax is how long a connection whose input ended waits at most for
// the calls in flight: the longest bash timeout, and a minute to bring
// back what the command changed.
const DrainMax = MaxTimeout + time.Minute

// Connect implements mcp.Transport.
func (t *StdioTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &stdioConn{out: t.Out, incoming: make(chan readResult), closed: make(chan struct{}),
		pending: map[jsonrpc.ID]bool{}, answered: make(chan struct{}, 1), drain: t.Drain}
	if c.drain <= 0 {
		c.drain = DrainMax
	}
	go c.readLoop(bufio.NewReaderSize(t.In, 64<<10))
	return c, nil
}

type readResult struct {
	msg jsonrpc.Message
	err error
}

type stdioConn struct {
	out       io.Writer
	wmu       sync.Mutex
	incoming  chan readResult
	closed    chan struct{}
	closeOnce sync.Once

	// pending holds the ids of calls read and not yet answered; answered
	// gets a value when one is.
	pmu      sync.Mutex
	pending  map[jsonrpc.ID]bool
	answered chan struct{}
	drain    time.Duration
}

// track notes a call read, and forgets one the client cancelled (the
// server need not answer it).
func (c *stdioConn) track(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return
	}
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if req.IsCall() {
		c.pending[req.ID] = true
		return
	}
	if req.Method == "notifications/cancelled" {
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
				c.forgetLocked(id)
			}
		}
	}
}

func (c *stdioConn) forgetLocked(id jsonrpc.ID) {
	if c.pending[id] {
		delete(c.pending, id)
		select {
		case c.answered <- struct{}{}:
		default:
		}
	}
}

// waitAnswered waits until every call read has been answered, the
// connection is closed, or the drain time has passed.
func (c *stdioConn) waitAnswered() {
	timer := time.NewTimer(c.drain)
	defer timer.Stop()
	for {
		c.pmu.Lock()
		n := len(c.pending)
		c.pmu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-c.answered:
		case <-c.closed:
			return
		case <-timer.C:
			return
		}
	}
}

func (c *stdioConn) SessionID() string { return "" }

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	case r := <-c.incoming:
		return r.msg, r.err
	}
}

func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	err = c.writeLine(data)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.pmu.Lock()
		c.forgetLocked(resp.ID)
		c.pmu.Unlock()
	}
	return err
}

func (c *stdioConn) writeLine(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.out.Write(append(data, '\n'))
	if errors.Is(err, syscall.EPIPE) {
		// The client stopped reading: its answers are lost, but the calls
		// in flight still finish and bring back what they changed (an
		// error here would cancel them).
		return nil
	}
	return err
}

func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

func (c *stdioConn) deliver(r readResult) bool {
	select {
	case c.incoming <- r:
		return true
	case <-c.closed:
		return false
	}
}

func (c *stdioConn) readLoop(r *bufio.Reader) {
	for {
		line, tooLong, err := readLine(r, MaxMessageBytes)
		if tooLong {
			c.reject(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("message of over %d bytes refused: the limit is %d bytes", MaxMessageBytes, MaxMessageBytes))
		} else if len(bytes.TrimSpace(line)) > 0 {
			if msg, ok := c.decode(line); ok {
				c.track(msg)
				if !c.deliver(readResult{msg: msg}) {
					return
				}
			}
		}
		if err != nil {
			// The end of the input ends the connection, which cancels the
			// calls in flight: let them finish first.
			c.waitAnswered()
			c.deliver(readResult{err: err})
			return
		}
	}
}

// decode parses one line, answering what cannot be served with an error.
func (c *stdioConn) decode(line []byte) (jsonrpc.Message, bool) {
	line = bytes.TrimSpace(line)
	if !json.Valid(line) {
		c.reject(nil, jsonrpc.CodeParseError, "parse error: the message is not valid JSON")
		return nil, false
	}
	if line[0] == '[' {
		c.reject(nil, jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not supported: send one message per line")
		return nil, false
	}
	msg, err := decodeMessage(line)
	if err != nil {
		var probe struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(line, &probe)
		c.reject(probe.ID, jsonrpc.CodeInvalidRequest, "invalid JSON-RPC message: "+err.Error())
		return nil, false
	}
	return msg, true
}

// reject answers a message that cannot be served. Its id is echoed when it
// is a valid one, else null, as JSON-RPC asks.
func (c *stdioConn) reject(rawID json.RawMessage, code int64, msg string) {
	id := rpcID(rawID)
	resp := struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", id, &jsonrpc.Error{Code: code, Message: msg}}
	data, _ := json.Marshal(resp)
	c.writeLine(data)
}

// readLine reads up to a newline; a line over max is read to its end and
// dropped.
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, tooLong, err
	}
}

// rpcID is a request's id as a JSON-RPC error answer echoes it: the id when
// it is a valid one (a string or an integer), else null.
func rpcID(rawID json.RawMessage) any {
	var v any
	if len(rawID) == 0 || json.Unmarshal(rawID, &v) != nil {
		return nil
	}
	switch v := v.(type) {
	case string:
		return v
	case float64:
		if v == float64(int64(v)) {
			return int64(v)
		}
	}
	return nil
}

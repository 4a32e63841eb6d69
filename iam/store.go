package iam

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/fsjournal"
	"github.com/tristore/tristore/internal/reqmemo"
)

// Files under DATA/.tristore/iam (directory mode 0700, files 0600):
//
//	master.key        32 random bytes: the AES-256-GCM key for secrets
//	users.json        the users; secrets encrypted (nonce||ciphertext, base64)
//	root-credentials  the generated root keys, written once on first start
//	lock              flock(2) target serialising writers across processes
const (
	dirName       = ".tristore/iam"
	usersFile     = "users.json"
	masterKeyFile = "master.key"
	rootCredsFile = "root-credentials"
	lockFile      = "lock"
	// RootName is the name of the admin user EnsureRoot creates.
	RootName = "root"
)

// User is one tristore user. Secrets are never part of it.
type User struct {
	Name      string    `json:"name"`
	AccessKey string    `json:"access_key"`
	Admin     bool      `json:"admin"`
	Created   time.Time `json:"created"`
}

// Errors.
var (
	// ErrUnknownAccessKey: no user has this access key. It satisfies
	// sigv4.IsUnknownAccessKey (method UnknownAccessKey) without iam
	// importing the front end.
	ErrUnknownAccessKey error = unknownKeyError{}
	ErrNoSuchUser             = errors.New("iam: no such user")
	ErrUserExists             = errors.New("iam: user already exists")
	ErrAccessKeyInUse         = errors.New("iam: access key already in use")
	ErrInvalid                = errors.New("iam: invalid argument")
	ErrLastAdmin              = errors.New("iam: refusing to remove the last admin user")
)

type unknownKeyError struct{}

func (unknownKeyError) Error() string          { return "iam: unknown access key" }
func (unknownKeyError) UnknownAccessKey() bool { return true }

// record is a user as stored on disk.
type record struct {
	User
	Secret string `json:"secret_enc"` // base64(nonce || AES-GCM(secret, aad=access key))
}

type fileDoc struct {
	Version int      `json:"version"`
	Users   []record `json:"users"`
}

// fileID identifies one version of users.json: writers replace it by
// rename, so a new inode (or size/mtime) means it changed.
type fileID struct {
	ino   uint64
	size  int64
	mtime time.Time
	ctime int64 // ns; rename changes it even when the inode number is reused
}

// Store is the user database of one data directory. It is safe for
// concurrent use, and several processes (serve and `tristore user`) may use
// the same directory: writes are serialised with flock and readers notice
// a replaced users.json with one stat per lookup.
type Store struct {
	dir  string
	aead cipher.AEAD
	// noJournal: the file system does not journal metadata
	// (internal/fsjournal); writeFileAtomic then frees what it replaces
	// only once that is durable.
	noJournal bool

	mu      sync.RWMutex
	loaded  fileID
	byName  map[string]record
	byKey   map[string]record
	secrets map[string]string // access key -> decrypted secret (memory only)
	// checks counts the stats of users.json by reload (for tests).
	checks atomic.Int64
}

// Open opens (creating on first use) the user database under dataDir.
func Open(dataDir string) (*Store, error) {
	dir := filepath.Join(dataDir, dirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("iam: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("iam: %w", err)
	}
	s := &Store{dir: dir, noJournal: !journaled(dir)}
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := s.cleanStale(); err != nil {
		return nil, err
	}
	key, err := s.masterKey()
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("iam: master key: %w", err)
	}
	if s.aead, err = cipher.NewGCM(block); err != nil {
		return nil, fmt.Errorf("iam: %w", err)
	}
	if err := s.reload(true); err != nil {
		return nil, err
	}
	return s, nil
}

// lock takes the cross-process writer lock.
func (s *Store) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("iam: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("iam: lock: %w", err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// masterKey reads master.key, creating it on first use. Call with the lock.
func (s *Store) masterKey() ([]byte, error) {
	p := filepath.Join(s.dir, masterKeyFile)
	key, err := os.ReadFile(p)
	if err == nil {
		if len(key) != 32 {
			return nil, fmt.Errorf("iam: %s has %d bytes, want 32 (corrupt key file; secrets cannot be decrypted)", p, len(key))
		}
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("iam: %w", err)
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("iam: %w", err)
	}
	if err := s.writeFileAtomic(masterKeyFile, key); err != nil {
		return nil, err
	}
	return key, nil
}

// writeFileAtomic writes dir/name with mode 0600: temp file, fsync,
// rename, fsync of the directory, so a crash leaves the old or new file.
//
// On a file system without a journal (internal/fsjournal, e.g. ext4 made
// with -O ^has_journal) the file replaced and a temp file given up are
// freed only once the disk no longer names them: a freed inode reused by
// the S3 store while its old name here was still on disk left users.json
// naming an object's inode after a power cut (test/powerloss). So there
// the file replaced first gets a second name (.NAME.old-*), the rename
// takes its link count from 2 to 1, and once the rename is durable the
// second name is removed, the directory fsynced and the inode written as
// deleted (fsjournal.Retire) before it is closed; a failed temp file is
// removed the same way. A second name left by a crash is removed at the
// next Open (cleanStale).
func (s *Store) writeFileAtomic(name string, data []byte) error {
	dir := s.dir
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("iam: %w", err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if !renamed {
			s.dropTemp(f)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("iam: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("iam: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("iam: %w", err)
	}
	target := filepath.Join(dir, name)
	vfd, keep := -1, ""
	if s.noJournal {
		if vfd, err = unix.Open(target, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
			k := filepath.Join(dir, "."+name+oldInfix+randomSuffix())
			if fsjournal.LinkFd(vfd, k) == nil {
				keep = k
			}
		}
	}
	durable := false
	defer func() { s.releaseReplaced(vfd, keep, renamed, durable) }()
	if hookBeforeRename != nil {
		hookBeforeRename(target)
	}
	if err := os.Rename(tmp, target); err != nil {
		return fmt.Errorf("iam: %w", err)
	}
	renamed = true
	f.Close()
	if err := fsjournal.SyncDir(dir); err != nil {
		return fmt.Errorf("iam: %w", err)
	}
	durable = true
	return nil
}

// oldInfix marks the second name of a replaced file (.NAME.old-*).
const oldInfix = ".old-"

// journaled is fsjournal.JournaledPath (tests force the journal-less path).
var journaled = fsjournal.JournaledPath

// hookBeforeRename, set only by tests, runs just before writeFileAtomic's
// rename.
var hookBeforeRename func(target string)

// hookRetire, set only by tests, runs just before a removed file's held
// descriptor is retired.
var hookRetire func(fd int)

func randomSuffix() string {
	var b [8]byte
	rand.Read(b[:])
	return fmt.Sprintf("%x", b[:])
}

// retire writes the held inode fd as deleted (fsjournal.Retire) and
// closes it; its removal must be durable already.
func retire(fd int) {
	if hookRetire != nil {
		hookRetire(fd)
	}
	fsjournal.Retire(fd)
	unix.Close(fd)
}

// dropTemp closes and removes a temp file writeFileAtomic gave up on;
// without a journal durably, before its inode is let go (see
// writeFileAtomic).
func (s *Store) dropTemp(f *os.File) {
	if !s.noJournal {
		f.Close()
		os.Remove(f.Name())
		return
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		os.Remove(f.Name())
		return
	}
	if os.Remove(f.Name()) == nil && fsjournal.SyncDir(s.dir) == nil {
		retire(fd)
		return
	}
	unix.Close(fd)
}

// releaseReplaced lets go of the file a rename replaced (vfd, -1: none)
// and its second name keep ("": none). Only when the rename is durable is
// the second name removed and the inode retired; a rename made but not
// durable keeps the second name until the next Open (removing it could
// leave the old name on disk pointing at a deleted inode); a rename not
// made leaves the file named, so its second name simply goes.
func (s *Store) releaseReplaced(vfd int, keep string, renamed, durable bool) {
	if vfd < 0 {
		return
	}
	switch {
	case !renamed:
		if keep != "" {
			os.Remove(keep)
		}
	case durable && keep != "":
		if os.Remove(keep) == nil && fsjournal.SyncDir(s.dir) == nil {
			retire(vfd)
			return
		}
	}
	unix.Close(vfd)
}

// cleanStale removes what writeFileAtomic left behind at a crash (temp
// files, second names of replaced files); without a journal durably (the
// directory fsynced before the inodes are retired and let go). Call with
// the lock.
func (s *Store) cleanStale() error {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("iam: %w", err)
	}
	var held []int
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, ".") || !(strings.Contains(n, ".tmp-") || strings.Contains(n, oldInfix)) || e.IsDir() {
			continue
		}
		p := filepath.Join(s.dir, n)
		fd := -1
		if s.noJournal {
			fd, _ = unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		if err := os.Remove(p); err != nil {
			if fd >= 0 {
				unix.Close(fd)
			}
			continue
		}
		if fd >= 0 {
			held = append(held, fd)
		}
	}
	if len(held) == 0 {
		return nil
	}
	if err := fsjournal.SyncDir(s.dir); err != nil {
		for _, fd := range held {
			unix.Close(fd)
		}
		return fmt.Errorf("iam: %w", err)
	}
	for _, fd := range held {
		retire(fd)
	}
	return nil
}

func statID(p string) (fileID, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return fileID{}, err
	}
	id := fileID{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.ino = st.Ino
		id.ctime = st.Ctim.Nano()
	}
	return id, nil
}

// reload re-reads users.json if it changed since the last load (or always
// with force). A missing file is an empty database.
func (s *Store) reload(force bool) error {
	p := filepath.Join(s.dir, usersFile)
	s.checks.Add(1)
	id, err := statID(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("iam: %w", err)
	}
	s.mu.RLock()
	same := !force && s.byName != nil && id == s.loaded
	s.mu.RUnlock()
	if same {
		return nil
	}
	var doc fileDoc
	if err == nil {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("iam: %w", err)
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			return fmt.Errorf("iam: %s is corrupt: %w", p, err)
		}
		// the file may have been replaced between stat and read; the id
		// of what we read is re-taken so a later change is still seen.
		if id2, err := statID(p); err == nil {
			id = id2
		}
	}
	byName := make(map[string]record, len(doc.Users))
	byKey := make(map[string]record, len(doc.Users))
	secrets := make(map[string]string, len(doc.Users))
	for _, r := range doc.Users {
		sec, err := s.decrypt(r.Secret, r.AccessKey)
		if err != nil {
			return fmt.Errorf("iam: secret of user %q: %w", r.Name, err)
		}
		byName[r.Name] = r
		byKey[r.AccessKey] = r
		secrets[r.AccessKey] = sec
	}
	s.mu.Lock()
	s.byName, s.byKey, s.secrets, s.loaded = byName, byKey, secrets, id
	s.mu.Unlock()
	return nil
}

func (s *Store) encrypt(secret, accessKey string) (string, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	ct := s.aead.Seal(nonce, nonce, []byte(secret), []byte(accessKey))
	return base64.StdEncoding.EncodeToString(ct), nil
}

func (s *Store) decrypt(enc, accessKey string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(b) < s.aead.NonceSize() {
		return "", errors.New("malformed ciphertext")
	}
	ns := s.aead.NonceSize()
	pt, err := s.aead.Open(nil, b[:ns], b[ns:], []byte(accessKey))
	if err != nil {
		return "", errors.New("cannot decrypt (wrong master.key?)")
	}
	return string(pt), nil
}

// errNoChange, returned by an update's fn, says it changed nothing:
// users.json is then not written.
var errNoChange = errors.New("iam: no change")

// secretOf is the decrypted secret of accessKey as last loaded ("" if none).
func (s *Store) secretOf(accessKey string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.secrets[accessKey]
}

// update runs fn on the current users under the writer lock and writes the
// result atomically (unless fn returns errNoChange).
func (s *Store) update(fn func(users map[string]record) error) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.reload(true); err != nil {
		return err
	}
	s.mu.RLock()
	users := make(map[string]record, len(s.byName))
	for k, v := range s.byName {
		users[k] = v
	}
	s.mu.RUnlock()
	if err := fn(users); errors.Is(err, errNoChange) {
		return nil
	} else if err != nil {
		return err
	}
	doc := fileDoc{Version: 1}
	for _, r := range users {
		doc.Users = append(doc.Users, r)
	}
	sort.Slice(doc.Users, func(i, j int) bool { return doc.Users[i].Name < doc.Users[j].Name })
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("iam: %w", err)
	}
	if err := s.writeFileAtomic(usersFile, append(data, '\n')); err != nil {
		return err
	}
	return s.reload(true)
}

// memoKey names this store's "users.json checked" mark in a request memo.
type memoKey struct{ s *Store }

// fresh reloads users.json if it changed, at most once per request: the
// S3 front end starts a memo per request (internal/reqmemo), so a signed
// request costs one stat of users.json (SecretFor for the signature, then
// UserFor for the identity), not two. A change made during the request
// applies from the next one on. Without a memo it checks every time.
func (s *Store) fresh(ctx context.Context) error {
	m := reqmemo.From(ctx)
	if _, ok := m.Get(memoKey{s}); ok {
		return nil
	}
	if err := s.reload(false); err != nil {
		return err
	}
	m.Set(memoKey{s}, true)
	return nil
}

// SecretFor returns the secret of accessKey (sigv4.Credentials).
func (s *Store) SecretFor(ctx context.Context, accessKey string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := s.fresh(ctx); err != nil {
		return "", err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	sec, ok := s.secrets[accessKey]
	if !ok {
		return "", ErrUnknownAccessKey
	}
	return sec, nil
}

// UserByAccessKey returns the user owning accessKey.
func (s *Store) UserByAccessKey(accessKey string) (User, error) {
	return s.UserFor(context.Background(), accessKey)
}

// UserFor is UserByAccessKey within ctx's request (see fresh).
func (s *Store) UserFor(ctx context.Context, accessKey string) (User, error) {
	if err := s.fresh(ctx); err != nil {
		return User{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.byKey[accessKey]
	if !ok {
		return User{}, ErrUnknownAccessKey
	}
	return r.User, nil
}

// User returns the user called name.
func (s *Store) User(name string) (User, error) {
	if err := s.reload(false); err != nil {
		return User{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.byName[name]
	if !ok {
		return User{}, ErrNoSuchUser
	}
	return r.User, nil
}

// List returns all users sorted by name.
func (s *Store) List() ([]User, error) {
	if err := s.reload(false); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]User, 0, len(s.byName))
	for _, r := range s.byName {
		out = append(out, r.User)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Add creates a user with freshly generated keys and returns the secret
// (shown to the operator once; it is stored only encrypted).
func (s *Store) Add(name string, admin bool) (User, string, error) {
	ak, sec, err := GenerateKeys()
	if err != nil {
		return User{}, "", err
	}
	u, err := s.AddWithKeys(name, ak, sec, admin)
	if err != nil {
		return User{}, "", err
	}
	return u, sec, nil
}

// AddWithKeys creates a user with the given keys.
func (s *Store) AddWithKeys(name, accessKey, secret string, admin bool) (User, error) {
	if err := ValidName(name); err != nil {
		return User{}, err
	}
	if err := validKeys(accessKey, secret); err != nil {
		return User{}, err
	}
	u := User{Name: name, AccessKey: accessKey, Admin: admin, Created: time.Now().UTC().Truncate(time.Second)}
	err := s.update(func(users map[string]record) error {
		if _, ok := users[name]; ok {
			return fmt.Errorf("%w: %q", ErrUserExists, name)
		}
		for _, r := range users {
			if r.AccessKey == accessKey {
				return ErrAccessKeyInUse
			}
		}
		enc, err := s.encrypt(secret, accessKey)
		if err != nil {
			return err
		}
		users[name] = record{User: u, Secret: enc}
		return nil
	})
	if err != nil {
		return User{}, err
	}
	return u, nil
}

// Remove deletes the user called name. The last admin cannot be removed
// (nobody could manage the server any more).
func (s *Store) Remove(name string) error {
	return s.update(func(users map[string]record) error {
		r, ok := users[name]
		if !ok {
			return fmt.Errorf("%w: %q", ErrNoSuchUser, name)
		}
		if r.Admin {
			admins := 0
			for _, o := range users {
				if o.Admin {
					admins++
				}
			}
			if admins == 1 {
				return ErrLastAdmin
			}
		}
		delete(users, name)
		return nil
	})
}

func nowUTC() time.Time { return time.Now().UTC().Truncate(time.Second) }

// Store is the sigv4.Credentials of `serve` (checked structurally so iam
// does not import the front end).
var _ interface {
	SecretFor(ctx context.Context, accessKey string) (string, error)
} = (*Store)(nil)

package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The label scheme of every claim sbx creates. Label values must be valid
// Kubernetes label values (63 characters of [A-Za-z0-9._-], alphanumeric at
// both ends); a session key or user name that is not is replaced by a hash,
// and the exact key is kept in an annotation (LabelValue).
const (
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	ManagedByValue  = "sbx"
	LabelOwner      = "sbx.dev/owner"
	LabelSession    = "sbx.dev/session"
	LabelPersistent = "sbx.dev/persistent"
	AnnotSessionKey = "sbx.dev/session-key"
	AnnotOwner      = "sbx.dev/owner"
	AnnotHost       = "sbx.dev/host"
)

// agent-sandbox's own names.
const (
	annotPodName  = "agents.x-k8s.io/pod-name"
	labelClaimUID = "agents.x-k8s.io/claim-uid"
)

// LabelValue returns s when it is a valid label value, else "h-" and 40 hex
// digits of its SHA-256 (deterministic, so the same key always finds the
// same claims).
func LabelValue(s string) string {
	if s != "" && len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "h-" + hex.EncodeToString(sum[:])[:40]
}

// claimLabels are the labels of a new claim for a session of owner.
func claimLabels(owner, session string, persistent bool) map[string]string {
	p := "false"
	if persistent {
		p = "true"
	}
	return map[string]string{
		LabelManagedBy:  ManagedByValue,
		LabelOwner:      LabelValue(owner),
		LabelSession:    LabelValue(session),
		LabelPersistent: p,
	}
}

// ownerSelector selects every claim sbx made for owner; with a session, only
// that session's.
func ownerSelector(owner, session string) string {
	set := labels.Set{LabelManagedBy: ManagedByValue, LabelOwner: LabelValue(owner)}
	if session != "" {
		set[LabelSession] = LabelValue(session)
	}
	return labels.SelectorFromSet(set).String()
}

// claimGenerateName is the name prefix of a claim: sbx-<owner>-, cut and
// cleaned to stay a valid DNS label with room for the random suffix.
func claimGenerateName(owner string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(owner) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '-' || r == '.' || r == '_':
			b.WriteByte('-')
		}
		if b.Len() >= 20 {
			break
		}
	}
	o := strings.Trim(b.String(), "-")
	if o == "" {
		return "sbx-"
	}
	return "sbx-" + o + "-"
}

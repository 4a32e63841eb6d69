package cli

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// s3Conn is where and as whom the S3 commands connect.
type s3Conn struct {
	Endpoint  string
	Region    string
	AccessKey string
	SecretKey string
	Token     string
	PathStyle bool
	Profile   string // the profile used ("" when none was found)
}

// resolveS3Conn merges flags (and TRISTORE_* variables and the config file,
// which viper already layered under them), the AWS_* variables and the AWS
// shared files. Without --profile the AWS_* variables win over the default
// profile, as in aws-cli; an explicit --profile wins over them.
//
// We read the shared files ourselves rather than through the SDK's config
// loader: that loader falls back to the EC2 metadata endpoint for
// credentials, a network call off this machine that a CLI pointed at a
// local endpoint must never make.
func resolveS3Conn() (s3Conn, error) {
	name := cfg.GetString("profile")
	explicit := name != ""
	if name == "" {
		name = os.Getenv("AWS_PROFILE")
	}
	if name == "" {
		name = "default"
	}
	prof, found, err := loadAWSProfile(name)
	if err != nil {
		return s3Conn{}, err
	}
	if explicit && !found {
		return s3Conn{}, usageErr(fmt.Errorf("--profile %s: no such profile in %s or %s", name, awsCredentialsPath(), awsConfigPath()))
	}
	// pick returns the first non-empty of the flag, then env and profile
	// in the order the explicit profile dictates.
	pick := func(flag, profKey string, envs ...string) string {
		if flag != "" {
			if v := cfg.GetString(flag); v != "" {
				return v
			}
		}
		env := func() string {
			for _, e := range envs {
				if v := os.Getenv(e); v != "" {
					return v
				}
			}
			return ""
		}
		if explicit {
			if v := prof[profKey]; v != "" {
				return v
			}
			return env()
		}
		if v := env(); v != "" {
			return v
		}
		return prof[profKey]
	}
	c := s3Conn{
		Endpoint:  pick("endpoint-url", "endpoint_url", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
		Region:    pick("region", "region", "AWS_REGION", "AWS_DEFAULT_REGION"),
		AccessKey: pick("access-key", "aws_access_key_id", "AWS_ACCESS_KEY_ID"),
		SecretKey: pick("secret-key", "aws_secret_access_key", "AWS_SECRET_ACCESS_KEY"),
		Token:     pick("", "aws_session_token", "AWS_SESSION_TOKEN"),
		PathStyle: cfg.GetBool("path-style"),
	}
	if c.Endpoint == "" {
		c.Endpoint = cfg.GetString("endpoint")
	}
	if c.Endpoint == "" {
		c.Endpoint = prof["s3.endpoint_url"]
	}
	if !cfg.IsSet("path-style") && prof["s3.addressing_style"] == "virtual" {
		c.PathStyle = false
	}
	if found {
		c.Profile = name
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return c, usageErr(errors.New("an access key without a secret key, or the other way round (check flags, AWS_* variables and the profile)"))
	}
	return c, nil
}

func awsCredentialsPath() string {
	if p := os.Getenv("AWS_SHARED_CREDENTIALS_FILE"); p != "" {
		return p
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".aws", "credentials")
}

func awsConfigPath() string {
	if p := os.Getenv("AWS_CONFIG_FILE"); p != "" {
		return p
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".aws", "config")
}

// loadAWSProfile reads one profile from the credentials file ([name]) and
// the config file ([profile name], or [default]); the credentials file
// wins. Nested sections ("s3 =" followed by indented keys) come back as
// "s3.key". Missing files are no error.
func loadAWSProfile(name string) (map[string]string, bool, error) {
	out := map[string]string{}
	found := false
	cfgSection := "profile " + name
	if name == "default" {
		cfgSection = "default"
	}
	for _, f := range []struct{ path, section string }{{awsCredentialsPath(), name}, {awsConfigPath(), cfgSection}} {
		sec, ok, err := iniSection(f.path, f.section)
		if err != nil {
			return nil, false, err
		}
		found = found || ok
		for k, v := range sec {
			if _, set := out[k]; !set {
				out[k] = v
			}
		}
	}
	return out, found, nil
}

// iniSection returns the keys of one [section] of an AWS-style INI file.
func iniSection(path, section string) (map[string]string, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	keys := map[string]string{}
	found, in := false, false
	nested := ""
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		raw := sc.Text()
		s := strings.TrimSpace(raw)
		if s == "" || s[0] == '#' || s[0] == ';' {
			continue
		}
		if s[0] == '[' {
			if !strings.HasSuffix(s, "]") {
				return nil, false, fmt.Errorf("%s:%d: bad section header %q", path, line, s)
			}
			in = strings.TrimSpace(s[1:len(s)-1]) == section
			found = found || in
			nested = ""
			continue
		}
		if !in {
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, false, fmt.Errorf("%s:%d: want key = value, got %q", path, line, s)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		indented := raw[0] == ' ' || raw[0] == '\t'
		switch {
		case v == "" && !indented:
			nested = k // "s3 =" opens a nested block
		case indented && nested != "":
			keys[nested+"."+k] = v
		default:
			nested = ""
			keys[k] = v
		}
	}
	return keys, found, sc.Err()
}

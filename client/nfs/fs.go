package nfs

import (
	"context"
	"time"

	"github.com/tristore/tristore/proto/nfs3"
)

// FSSTAT, FSINFO and PATHCONF.

// Fsstat returns space and file counts of the file system holding fh.
func (c *Client) Fsstat(ctx context.Context, fh FH) (*FSStat, error) {
	var res nfs3.FsstatRes
	if err := c.callNFS(ctx, "FSSTAT", nfs3.ProcFsstat, true, &nfs3.GetattrArgs{FH: nfs3.FH(fh)}, &res); err != nil {
		return nil, err
	}
	if err := status("FSSTAT", res.Status); err != nil {
		return nil, err
	}
	return &FSStat{TotalBytes: res.TBytes, FreeBytes: res.FBytes, AvailBytes: res.ABytes,
		TotalFiles: res.TFiles, FreeFiles: res.FFiles, AvailFiles: res.AFiles, Invarsec: res.Invarsec}, nil
}

// Fsinfo returns the server's transfer sizes and properties.
func (c *Client) Fsinfo(ctx context.Context, fh FH) (*FSInfo, error) {
	var res nfs3.FsinfoRes
	if err := c.callNFS(ctx, "FSINFO", nfs3.ProcFsinfo, true, &nfs3.GetattrArgs{FH: nfs3.FH(fh)}, &res); err != nil {
		return nil, err
	}
	if err := status("FSINFO", res.Status); err != nil {
		return nil, err
	}
	return &FSInfo{RtMax: res.RtMax, RtPref: res.RtPref, RtMult: res.RtMult,
		WtMax: res.WtMax, WtPref: res.WtPref, WtMult: res.WtMult, DtPref: res.DtPref,
		MaxFileSize: res.MaxFileSize,
		TimeDelta:   time.Duration(res.TimeDelta.Sec)*time.Second + time.Duration(res.TimeDelta.Nsec),
		Properties:  res.Properties}, nil
}

// Pathconf returns name and link limits for fh.
func (c *Client) Pathconf(ctx context.Context, fh FH) (*PathConf, error) {
	var res nfs3.PathconfRes
	if err := c.callNFS(ctx, "PATHCONF", nfs3.ProcPathconf, true, &nfs3.GetattrArgs{FH: nfs3.FH(fh)}, &res); err != nil {
		return nil, err
	}
	if err := status("PATHCONF", res.Status); err != nil {
		return nil, err
	}
	return &PathConf{LinkMax: res.LinkMax, NameMax: res.NameMax, NoTrunc: res.NoTrunc,
		ChownRestricted: res.ChownRestricted, CaseInsensitive: res.CaseInsensitive, CasePreserving: res.CasePreserving}, nil
}

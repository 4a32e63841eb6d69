# S3 authentication (frontend/s3/sigv4 peer tests): clients whose SigV4
# signing the verifier is tested against.
APT_PKGS+=(s3cmd rclone python3 python3-pip)
PIP_PKGS+=(boto3 awscli)

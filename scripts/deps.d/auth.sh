# S3 authentication (frontend/s3/sigv4 peer tests): clients whose SigV4
# signing the verifier is tested against. boto3 and awscli go into .venv.
APT_PKGS+=(s3cmd rclone curl)
PIP_PKGS+=(boto3 awscli)

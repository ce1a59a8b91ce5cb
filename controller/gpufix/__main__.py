from gpufix.cli import main

main()

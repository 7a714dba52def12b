from dagwright.cli import main

main()
